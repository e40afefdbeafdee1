"""Is a C++ compiler safe for building an extension that torch will load?

An extension built with the wrong compiler can load and then crash: on a CUDA
image whose default CXX was a newer GCC than the system's libstdc++, every
ProcessGroupRing constructor segfaulted inside `std::ostream << long`. Two
mismatches cause that class of failure, and both are checked here, with a
third that caused it on that image:

1. The compiler's libstdc++ is newer than the one the Python process loads
   with torch. Code compiled against newer headers may use symbols and inline
   layouts the older runtime lacks; the process has one libstdc++, and it is
   the one torch brought in. The compiler's libstdc++ must be no newer
   (GLIBCXX_3.4.N symbol versions are the measure).
2. The compiler does not use libstdc++ at all (libc++): torch's C++ types
   would not match.
3. The compiler links libstdc++ statically (its own libstdc++.a, no .so
   beside it: the GPU image's /opt/gcc/bin/g++, GCC 13.3, does). The
   extension then carries a private copy of parts of the C++ runtime (locale
   facets, stream inserters) beside the one torch loads, and the two copies'
   static state disagree: `std::ostream << long` called a wrong facet and
   segfaulted. A probe library is linked with the linker's --trace to see
   which libstdc++ file the link really takes.

The string ABI flag (_GLIBCXX_USE_CXX11_ABI) is checked by CMake itself with
the real compile flags (CMakeLists.txt), since CXXFLAGS can override it.

Used by CMakeLists.txt (`check`, fails the configure step with a message that
names the compiler, the runtime and the fix) and by setup.py (`pick`, which
looks for a compatible compiler on the machine when the requested one is not).
Run it with the Python that will load the extension: it imports torch to see
which libstdc++ that process loads.
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

_SYMBOL_VERSION = re.compile(rb"GLIBCXX_3\.4(?:\.(\d+))?\b")

# libstdc++'s newest GLIBCXX_3.4.N by GCC major (the _GLIBCXX_RELEASE macro),
# for compilers whose own libstdc++.so cannot be found.
_LEVEL_BY_GCC_MAJOR = {7: 24, 8: 25, 9: 28, 10: 28, 11: 29, 12: 30, 13: 32, 14: 33, 15: 34}


def symbol_level(path):
    """Newest GLIBCXX_3.4.N symbol version a libstdc++ file defines (N)."""
    with open(path, "rb") as library:
        found = [int(m.group(1) or 0) for m in _SYMBOL_VERSION.finditer(library.read())]
    if not found:
        raise ValueError(f"{path} has no GLIBCXX symbol versions: not a libstdc++")
    return max(found)


def runtime_libstdcxx():
    """The libstdc++ this Python process loads once torch is imported."""
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    import torch  # noqa: F401  (loads libtorch and, with it, libstdc++)

    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libstdc++.so"):
                return os.path.realpath(path)
    raise RuntimeError("no libstdc++ is loaded after `import torch`")


def _run(cxx, *args, stdin=""):
    return subprocess.run([cxx, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def compiler_libstdcxx(cxx):
    """(path or None, level or None, description) of what cxx's headers need."""
    probe = _run(cxx, "-x", "c++", "-E", "-dM", "-", stdin="#include <cstddef>\n")
    if probe.returncode != 0:
        raise RuntimeError(f"{cxx} cannot preprocess C++: {probe.stderr.strip()[:300]}")
    macros = dict(re.findall(r"^#define (\S+) ?(.*)$", probe.stdout, re.MULTILINE))
    if "__GLIBCXX__" not in macros:
        return None, None, "not libstdc++ (torch is built with libstdc++)"
    path = _run(cxx, "-print-file-name=libstdc++.so.6").stdout.strip()
    if os.path.isabs(path) and os.path.exists(path):
        return os.path.realpath(path), symbol_level(path), f"libstdc++ {os.path.realpath(path)}"
    release = int(macros.get("_GLIBCXX_RELEASE", "0") or 0)
    level = _LEVEL_BY_GCC_MAJOR.get(release, max(_LEVEL_BY_GCC_MAJOR.values()) + 1)
    return None, level, f"libstdc++ headers of GCC {release}"


# What the extension does with the C++ runtime that broke on the static link.
_LINK_PROBE = """#include <sstream>
#include <string>
std::string ringreduce_probe(long v) { std::ostringstream out; out << v; return out.str(); }
"""


def linked_libstdcxx(cxx):
    """The libstdc++ file cxx takes when it links a shared library, as the
    linker's --trace names it; None when the probe cannot tell (a linker
    without --trace, no linker at all: the build itself will say)."""
    with tempfile.TemporaryDirectory() as folder:
        probe = _run(cxx, "-shared", "-fPIC", "-x", "c++", "-", "-o",
                     os.path.join(folder, "probe.so"), "-Wl,--trace", stdin=_LINK_PROBE)
    if probe.returncode != 0:
        return None
    for line in (probe.stdout + probe.stderr).splitlines():
        found = re.search(r"[^\s()]*libstdc\+\+[^\s()]*", line)
        if found:
            return found.group(0)
    return None


def compiler_version(cxx):
    first = _run(cxx, "--version").stdout.splitlines()
    return first[0] if first else "unknown version"


def problem(cxx, runtime_path, runtime_level):
    """None when cxx is safe for this runtime, else why it is not."""
    resolved = shutil.which(cxx) or cxx
    try:
        _, level, what = compiler_libstdcxx(resolved)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as error:
        return f"{resolved}: {error}"
    if level is None:
        return f"{resolved} ({compiler_version(resolved)}) uses {what}"
    try:
        linked = linked_libstdcxx(resolved)
    except subprocess.TimeoutExpired:
        linked = None
    if linked and linked.endswith(".a"):
        return (f"{resolved} ({compiler_version(resolved)}) links libstdc++ statically "
                f"({linked}): the extension would carry its own copy of parts of the C++ "
                f"runtime beside the one torch loads ({runtime_path}) and crash where the "
                f"two meet")
    if level > runtime_level:
        return (f"{resolved} ({compiler_version(resolved)}) compiles against {what} "
                f"(GLIBCXX_3.4.{level}), newer than the libstdc++ torch runs with here: "
                f"{runtime_path} (GLIBCXX_3.4.{runtime_level}); the extension would load "
                f"and then crash")
    return None


def candidates():
    """Compilers worth trying, the system's first (it built the system libstdc++)."""
    found = []
    for name in ["/usr/bin/g++", "/usr/bin/c++", "g++", "c++",
                 *sorted(glob.glob("/usr/bin/g++-[0-9]*")), "clang++"]:
        path = shutil.which(name)
        if path and os.path.realpath(path) not in {os.path.realpath(p) for p in found}:
            found.append(path)
    return found


def fix_text(runtime_path, runtime_level):
    return ("Fix: build with the system compiler, e.g. `CXX=/usr/bin/g++ CUDAHOSTCXX=/usr/bin/g++ "
            "pip install --no-build-isolation .` (Debian: apt-get install g++), or any g++ that "
            f"links libstdc++ as a shared library no newer than GLIBCXX_3.4.{runtime_level} "
            f"({runtime_path}).")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", choices=["check", "pick"])
    parser.add_argument("--cxx", action="append", default=[],
                        help="compiler to check (repeatable: C++ and CUDA host compilers)")
    args = parser.parse_args(argv)
    runtime_path = runtime_libstdcxx()
    runtime_level = symbol_level(runtime_path)

    if args.mode == "check":
        problems = [p for p in (problem(cxx, runtime_path, runtime_level) for cxx in args.cxx) if p]
        if problems:
            print("ringreduce: incompatible compiler.\n  " + "\n  ".join(problems) + "\n"
                  + fix_text(runtime_path, runtime_level))
            return 1
        print(f"runtime libstdc++ {runtime_path} (GLIBCXX_3.4.{runtime_level})")
        return 0

    # pick: the requested compiler when it is safe, else the first safe one.
    requested = args.cxx[0] if args.cxx else "c++"
    why = problem(requested, runtime_path, runtime_level)
    if why is None:
        print(shutil.which(requested) or requested)
        return 0
    for candidate in candidates():
        if problem(candidate, runtime_path, runtime_level) is None:
            print(f"ringreduce: not using {why}; using {candidate} instead.", file=sys.stderr)
            print(candidate)
            return 0
    print(f"ringreduce: incompatible compiler.\n  {why}\n  and no compatible compiler was found "
          f"among {', '.join(candidates()) or 'none'}.\n" + fix_text(runtime_path, runtime_level),
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
