# Writes OUT: a header defining RINGREDUCE_COMMIT, the commit of the sources
# in SOURCE_DIR ("" where git or the repository is absent). Run at every
# build (CMakeLists.txt, ringreduce_commit), so an incremental build after a
# commit names the new one; the file is rewritten only when the commit
# changed, so nothing recompiles otherwise.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE unread)
if(unread)
  set(commit "")
endif()
set(text "// Written by cmake/write_commit.cmake at each build.\n#define RINGREDUCE_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
