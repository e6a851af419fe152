// NCERT_ADDRESS_SANITIZER is 1 in builds under AddressSanitizer, whichever compiler: GCC defines
// __SANITIZE_ADDRESS__, clang (the project's sanitizer build, tools/sanitizers) only answers
// __has_feature(address_sanitizer). Code that must take another path under ASan (memory it
// should see overflows of, signals ASan handles itself) tests this one macro.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NCERT_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NCERT_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef NCERT_ADDRESS_SANITIZER
#define NCERT_ADDRESS_SANITIZER 0
#endif
