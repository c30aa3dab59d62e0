// ThreadSanitizer and the system's OpenSSL: libcrypto is not instrumented, so TSan sees only
// its calls to intercepted functions (malloc, memcpy, memcmp) and reports the library's own
// lazily cached fields (a CA's canonical name, computed under the store's lock by one thread
// and compared without it by another: openssl/openssl#25202) as races of the program. Those
// reports are OpenSSL's business; every access UCP makes is still checked.

#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libcrypto.so\n"
         "called_from_lib:libssl.so\n";
}
#endif
