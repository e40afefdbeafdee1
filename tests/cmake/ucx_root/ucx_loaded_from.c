/* Prints UCX's version and the file libucp was loaded from: a build against
   RINGREDUCE_UCX_ROOT must load that root's library (DT_RPATH), not the
   system's. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

int main(void) {
  Dl_info info;
  if (dladdr((void*)&ucp_get_version_string, &info) == 0) return 1;
  printf("%s %s\n", ucp_get_version_string(), info.dli_fname);
  return 0;
}
