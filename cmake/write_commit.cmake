# Writes OUT: a header defining RINGREDUCE_COMMIT, the commit of the sources
# in SOURCE_DIR ("" where git or the repository is absent, or where
# SOURCE_DIR is not the repository's top). Run at every
# build (CMakeLists.txt, ringreduce_commit), so an incremental build after a
# commit names the new one; the file is rewritten only when the commit
# changed, so nothing recompiles otherwise.
# Only where SOURCE_DIR is its repository's top: sources copied into another
# project's repository would otherwise take that project's commit, and two
# nodes with the same sources at two of its commits would be told they run
# two builds.
execute_process(COMMAND git -C "${SOURCE_DIR}" rev-parse --show-toplevel --short=12 HEAD
                OUTPUT_VARIABLE answer OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE unread)
set(commit "")
if(NOT unread)
  string(REPLACE "\n" ";" answer "${answer}")
  list(LENGTH answer count)
  if(count EQUAL 2)
    list(GET answer 0 top)
    list(GET answer 1 head)
    get_filename_component(top "${top}" REALPATH)
    get_filename_component(source "${SOURCE_DIR}" REALPATH)
    if(top STREQUAL source)
      set(commit "${head}")
    endif()
  endif()
endif()
set(text "// Written by cmake/write_commit.cmake at each build.\n#define RINGREDUCE_COMMIT \"${commit}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
