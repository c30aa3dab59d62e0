// llhttp's generated parser built a second time with -msse4.2 (its own SSE4.2 paths scan header
// names and values 16 bytes at a time), under names of its own (llhttp_sse42_names.h, generated
// from llhttp.c's global functions), and the dispatcher that api.c's llhttp_execute() calls:
// the SSE4.2 copy on a CPU that has it, the plain one otherwise. Both copies are the same state
// machine (the same states, flags and callbacks); only the scanning of spans differs.

// (The names first.)
// clang-format off
#include "llhttp_sse42_names.h"
#include "llhttp.c"
// clang-format on

#undef llhttp__internal_execute

int llhttp__internal_execute(llhttp__internal_t* s, const char* p, const char* endp);
int ucp_llhttp_internal_execute(llhttp__internal_t* s, const char* p, const char* endp);

int ucp_llhttp_internal_execute(llhttp__internal_t* s, const char* p, const char* endp) {
  // (A read of the CPU model libgcc filled in at start-up, and a branch that always goes the
  // same way.)
  if (__builtin_cpu_supports("sse4.2")) return llhttp__internal_execute_sse42(s, p, endp);
  return llhttp__internal_execute(s, p, endp);
}
