//===- HostMemoryRetention.cpp - Reusing freed host memory ----------------===//
#include "drt/conformance/HostMemoryRetention.h"

// Any header of the C library says whether it is glibc (__GLIBC__).
#include <cstdlib>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace drt::conformance {

void retainFreedHostMemory() {
#ifdef __GLIBC__
  // Set, they also stay put: glibc would otherwise raise both as mappings
  // are freed, so that what is reused would depend on the order of frees.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

} // namespace drt::conformance
