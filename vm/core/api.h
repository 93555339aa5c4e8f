/* api.h - what every public header shares: the export marker and the library's version (docs/API.md). */
#ifndef FVM_API_H
#define FVM_API_H

/* Marks what libfedvm.so exports: the functions and tables of the public
 * headers (vm/fedvm.h and those it includes). The library is built with
 * -fvisibility=hidden, so nothing else is exported. */
#if defined(__GNUC__) || defined(__clang__)
#define FVM_API __attribute__((visibility("default")))
#else
#define FVM_API
#endif

/* The version of the headers; the Makefile reads it from here. */
#define FVM_VERSION "0.1.0"

/* The version of the library that runs (may differ from FVM_VERSION when a
 * program was built against other headers). Static storage. */
FVM_API const char *fvm_version(void);

#endif
