/* dtrain.i: the one SWIG interface of libdtrain, over the public C header only.
 *
 * Each language's part (its module name, how a dt_status becomes that language's error,
 * how arrays and out-handles cross) lives in its own file, selected here, and is read
 * before the header so its typemaps, %ignore and %rename apply to every declaration.
 * The idiomatic classes (handles with constructors and close) are written in the host
 * language over this raw layer: bindings/python/dtrain, bindings/java, bindings/go.
 *
 *   swig -python -I<prefix>/include bindings/swig/dtrain.i
 *   swig -java -package org.dtrain.internal -I<prefix>/include bindings/swig/dtrain.i
 *   swig -go -cgo -intgosize 64 -I<prefix>/include bindings/swig/dtrain.i
 */
#if defined(SWIGPYTHON)
%include "dtrain_python.i"
#elif defined(SWIGJAVA)
%include "dtrain_java.i"
#elif defined(SWIGGO)
%include "dtrain_go.i"
#else
#error "dtrain.i has parts for -python, -java and -go only"
#endif

%{
#include <dtrain/dtrain.h>
%}

%include <stdint.i>
/* DT_API marks exports when the library itself is built; to a host it is nothing. */
#define DT_API
%include <dtrain/dtrain.h>
