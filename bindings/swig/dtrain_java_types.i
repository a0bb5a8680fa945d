/* dtrain_java_types.i: how each C type of dtrain.h crosses to Java, %included by
 * dtrain_java.i before anything is declared (a typemap applies to what follows it).
 *
 * Held here, in this order: the UTF-8 string conversions (written out, since JNI's own
 * "UTF" is not UTF-8; the error path uses them too), handles as `long`, scalars and
 * strings in, out-values as return values, the helpers' small fixed arrays, shapes,
 * (pointer, length) pairs from one Java array, direct ByteBuffers (in, and out as views)
 * and the streaming listener. Each typemap is written once, in a macro where several C
 * types share it; the C functions they serve are in dtrain.h and dtrain_java_helpers.i.
 */

%{
/* java.lang.String from UTF-8 bytes; an invalid sequence becomes U+FFFD. */
static jstring dtj_new_string(JNIEnv* env, const char* s) {
  jchar* buf;
  size_t n, k = 0;
  const unsigned char *p, *end;
  jstring out;
  if (!s) return NULL;
  n = strlen(s);
  buf = (jchar*)malloc((n + 1) * sizeof(jchar)); /* at most one UTF-16 unit per byte */
  if (!buf) return (*env)->NewStringUTF(env, "(out of memory)");
  p = (const unsigned char*)s;
  end = p + n;
  while (p < end) {
    uint32_t c = *p, min;
    size_t len, i;
    if (c < 0x80) { buf[k++] = (jchar)c; ++p; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; c &= 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; c &= 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; c &= 0x07; min = 0x10000; }
    else { buf[k++] = 0xFFFD; ++p; continue; }
    if ((size_t)(end - p) < len) { buf[k++] = 0xFFFD; ++p; continue; }
    for (i = 1; i < len && (p[i] & 0xC0) == 0x80; ++i) c = (c << 6) | (p[i] & 0x3F);
    if (i < len || c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
      buf[k++] = 0xFFFD; ++p; continue;
    }
    p += len;
    if (c >= 0x10000) {
      c -= 0x10000;
      buf[k++] = (jchar)(0xD800 + (c >> 10));
      buf[k++] = (jchar)(0xDC00 + (c & 0x3FF));
    } else {
      buf[k++] = (jchar)c;
    }
  }
  out = (*env)->NewString(env, buf, (jsize)k);
  free(buf);
  return out;
}

/* A malloc'ed UTF-8 copy of a Java string (JNI's own "UTF" is modified UTF-8, which
 * differs for U+0000 and above U+FFFF). NULL with a Java exception pending on failure. */
static char* dtj_utf8(JNIEnv* env, jstring js) {
  jsize n = (*env)->GetStringLength(env, js), i;
  const jchar* u;
  char* out;
  size_t k = 0;
  out = (char*)malloc((size_t)n * 3 + 1);
  if (!out) {
    SWIG_JavaThrowException(env, SWIG_JavaOutOfMemoryError, "string argument");
    return NULL;
  }
  u = (*env)->GetStringChars(env, js, NULL);
  if (!u) { free(out); return NULL; }
  for (i = 0; i < n; ++i) {
    uint32_t c = u[i];
    if (c == 0) {
      (*env)->ReleaseStringChars(env, js, u);
      free(out);
      SWIG_JavaThrowException(env, SWIG_JavaIllegalArgumentException,
                              "a string argument contains the character U+0000");
      return NULL;
    }
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n && u[i + 1] >= 0xDC00 && u[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[i + 1] - 0xDC00);
      ++i;
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = 0xFFFD; /* a lone surrogate */
    }
    if (c < 0x80) {
      out[k++] = (char)c;
    } else if (c < 0x800) {
      out[k++] = (char)(0xC0 | (c >> 6));
      out[k++] = (char)(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out[k++] = (char)(0xE0 | (c >> 12));
      out[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      out[k++] = (char)(0x80 | (c & 0x3F));
    } else {
      out[k++] = (char)(0xF0 | (c >> 18));
      out[k++] = (char)(0x80 | ((c >> 12) & 0x3F));
      out[k++] = (char)(0x80 | ((c >> 6) & 0x3F));
      out[k++] = (char)(0x80 | (c & 0x3F));
    }
  }
  out[k] = '\0';
  (*env)->ReleaseStringChars(env, js, u);
  return out;
}
%}

/* ---------------------------------------------------------------------------------- */
/* Handles: a long in Java (0 is NULL); an out-handle is the return value.              */
/* ---------------------------------------------------------------------------------- */
%define DTJ_HANDLE(T)
%typemap(jni) T*, const T* "jlong"
%typemap(jtype) T*, const T* "long"
%typemap(jstype) T*, const T* "long"
%typemap(javain) T*, const T* "$javainput"
%typemap(in) T*, const T* %{ $1 = ($1_ltype)(intptr_t)$input; %}
%typemap(in, numinputs=0) T** (T* handle) %{ handle = NULL; $1 = &handle; %}
%typemap(argout) T** %{ $result = (jlong)(intptr_t)handle$argnum; %}
%enddef
DTJ_HANDLE(dt_options)
DTJ_HANDLE(dt_tensor)
DTJ_HANDLE(dt_mesh)
DTJ_HANDLE(dt_module)
DTJ_HANDLE(dt_optimizer)
DTJ_HANDLE(dt_engine)
DTJ_HANDLE(dt_dataset)
DTJ_HANDLE(dt_loader)
DTJ_HANDLE(dt_server)
DTJ_HANDLE(dt_cancel)
DTJ_HANDLE(dt_tokenizer)
DTJ_HANDLE(dt_detokenizer)

/* ---------------------------------------------------------------------------------- */
/* Scalars and strings in; out-values as the return value                               */
/* ---------------------------------------------------------------------------------- */
/* uint64_t (a fill's seed) is a Java long holding the same 64 bits. */
%apply long long { uint64_t };

/* Strings in: proper UTF-8 (null stays NULL). */
%typemap(in) const char* %{
  $1 = NULL;
  if ($input) {
    $1 = ($1_ltype)dtj_utf8(jenv, $input);
    if (!$1) return $null;
  }
%}
%typemap(freearg) const char* %{ free((void*)$1); %}

%define DTJ_OUT_SCALAR(CTYPE, JNITYPE)
%typemap(in, numinputs=0) CTYPE* (CTYPE value) %{ value = 0; $1 = &value; %}
%typemap(argout) CTYPE* %{ $result = (JNITYPE)value$argnum; %}
%enddef
DTJ_OUT_SCALAR(int64_t, jlong)
DTJ_OUT_SCALAR(int32_t, jint)
DTJ_OUT_SCALAR(dt_dtype, jint)
DTJ_OUT_SCALAR(size_t, jlong)
DTJ_OUT_SCALAR(double, jdouble)

%typemap(in, numinputs=0) const char** (const char* str) %{ str = NULL; $1 = ($1_ltype)&str; %}
%typemap(argout) const char** %{ $result = dtj_new_string(jenv, str$argnum); %}

/* A malloc'ed string that a helper returns (JSON). */
%typemap(in, numinputs=0) char** json_out (char* json) %{ json = NULL; $1 = &json; %}
%typemap(argout) char** json_out %{ $result = json$argnum ? dtj_new_string(jenv, json$argnum) : NULL; %}
%typemap(freearg) char** json_out %{ free(json$argnum); %}

/* The helpers' up-to-DT_MAX_DIMS outputs (dtj_longs): a new long[]. Every int64_t stays a
 * long on its way out (a double would round counters above 2^53). */
%define DTJ_OUT_ARRAY(STRUCT, JNAME, JELEM)
%typemap(in, numinputs=0) STRUCT* (STRUCT values) %{ values.n = 0; $1 = &values; %}
%typemap(argout) STRUCT* %{
  $result = (*jenv)->New##JNAME##Array(jenv, values$argnum.n);
  if ($result) (*jenv)->Set##JNAME##ArrayRegion(jenv, $result, 0, values$argnum.n, (const JELEM*)values$argnum.v);
%}
%enddef
DTJ_OUT_ARRAY(dtj_longs, Long, jlong)

/* A shape: long[] (null: a scalar). */
%typemap(jni) (const int64_t* shape, int32_t ndim) "jlongArray"
%typemap(jtype) (const int64_t* shape, int32_t ndim) "long[]"
%typemap(jstype) (const int64_t* shape, int32_t ndim) "long[]"
%typemap(javain) (const int64_t* shape, int32_t ndim) "$javainput"
%typemap(in) (const int64_t* shape, int32_t ndim) %{
  $1 = NULL;
  $2 = 0;
  if ($input) {
    $2 = (int32_t)(*jenv)->GetArrayLength(jenv, $input);
    if ($2 > 0) {
      $1 = (int64_t*)(*jenv)->GetLongArrayElements(jenv, $input, NULL);
      if (!$1) return $null;
    }
  }
%}
%typemap(argout) (const int64_t* shape, int32_t ndim) ""
%typemap(freearg) (const int64_t* shape, int32_t ndim) %{
  if ($1) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong*)$1, JNI_ABORT);
%}

/* ---------------------------------------------------------------------------------- */
/* Arrays: (pointer, length) from one Java array. CRIT_*: a critical region (the call   */
/* is a memcpy); ELEMS_*: Get<T>ArrayElements, for calls that run long or call Java.    */
/* *_IN are not written back. Used through %apply in dtrain_java_helpers.i.             */
/* ---------------------------------------------------------------------------------- */
/* One kind (CRIT or ELEMS) of one element type: GET and RELEASE are the JNI calls. */
%define DTJ_ARRAY_KIND(CTYPE, JARRAY, JAVATYPE, IN, OUT, GET, RELEASE)
%typemap(jni) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) "JARRAY"
%typemap(jtype) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) "JAVATYPE[]"
%typemap(jstype) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) "JAVATYPE[]"
%typemap(javain) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) "$javainput"
%typemap(in) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "array is null");
    return $null;
  }
  $2 = (int64_t)(*jenv)->GetArrayLength(jenv, $input);
  $1 = ($1_ltype)(*jenv)->GET(jenv, $input, NULL);
  if (!$1) return $null;
%}
%typemap(argout) (const CTYPE* IN, int64_t LEN), (CTYPE* OUT, int64_t LEN) ""
%typemap(freearg) (const CTYPE* IN, int64_t LEN) %{
  if ($1) (*jenv)->RELEASE(jenv, $input, (void*)$1, JNI_ABORT);
%}
%typemap(freearg) (CTYPE* OUT, int64_t LEN) %{
  if ($1) (*jenv)->RELEASE(jenv, $input, (void*)$1, 0);
%}
%enddef

%define DTJ_ARRAY(CTYPE, JARRAY, JAVATYPE, JNAME)
DTJ_ARRAY_KIND(CTYPE, JARRAY, JAVATYPE, CRIT_IN, CRIT_OUT,
               GetPrimitiveArrayCritical, ReleasePrimitiveArrayCritical)
DTJ_ARRAY_KIND(CTYPE, JARRAY, JAVATYPE, ELEMS_IN, ELEMS_OUT,
               Get##JNAME##ArrayElements, Release##JNAME##ArrayElements)
%enddef
DTJ_ARRAY(float, jfloatArray, float, Float)
DTJ_ARRAY(double, jdoubleArray, double, Double)
DTJ_ARRAY(int32_t, jintArray, int, Int)
DTJ_ARRAY(int64_t, jlongArray, long, Long)
DTJ_ARRAY(int16_t, jshortArray, short, Short)
DTJ_ARRAY(int8_t, jbyteArray, byte, Byte)

/* A direct java.nio.ByteBuffer: its address and capacity (no copy). */
%typemap(jni) (void* BUFFER, int64_t CAPACITY) "jobject"
%typemap(jtype) (void* BUFFER, int64_t CAPACITY) "java.nio.ByteBuffer"
%typemap(jstype) (void* BUFFER, int64_t CAPACITY) "java.nio.ByteBuffer"
%typemap(javain) (void* BUFFER, int64_t CAPACITY) "$javainput"
%typemap(in) (void* BUFFER, int64_t CAPACITY) %{
  if (!$input) {
    SWIG_JavaThrowException(jenv, SWIG_JavaNullPointerException, "buffer is null");
    return $null;
  }
  $1 = (*jenv)->GetDirectBufferAddress(jenv, $input);
  $2 = (int64_t)(*jenv)->GetDirectBufferCapacity(jenv, $input);
  if (!$1 || $2 < 0) {
    SWIG_JavaThrowException(jenv, SWIG_JavaIllegalArgumentException, "buffer is not a direct ByteBuffer");
    return $null;
  }
%}

/* A direct ByteBuffer itself (a helper keeps a global reference to it while a tensor
 * borrows its memory). */
%typemap(jni) (jobject buffer, JNIEnv* env) "jobject"
%typemap(jtype) (jobject buffer, JNIEnv* env) "java.nio.ByteBuffer"
%typemap(jstype) (jobject buffer, JNIEnv* env) "java.nio.ByteBuffer"
%typemap(javain) (jobject buffer, JNIEnv* env) "$javainput"
%typemap(in) (jobject buffer, JNIEnv* env) %{ $1 = $input; $2 = jenv; %}

/* A new int[] a helper made (a tokenizer's ids; the JNIEnv it needs is the call's own). */
%typemap(in, numinputs=0) (JNIEnv* env, jintArray* ids_out) (jintArray ids) %{
  ids = NULL;
  $1 = jenv;
  $2 = &ids;
%}
%typemap(argout) (JNIEnv* env, jintArray* ids_out) %{ $result = ids$argnum; %}

/* A new direct ByteBuffer a helper made (the JNIEnv it needs is the call's own). */
%typemap(in, numinputs=0) (JNIEnv* env, jobject* buffer_out) (jobject buffer) %{
  buffer = NULL;
  $1 = jenv;
  $2 = &buffer;
%}
%typemap(argout) (JNIEnv* env, jobject* buffer_out) %{ $result = buffer$argnum; %}

/* The streaming listener: an org.dtrain.TokenListener, called on this thread. */
%typemap(jni) (jobject listener, JNIEnv* env) "jobject"
%typemap(jtype) (jobject listener, JNIEnv* env) "org.dtrain.TokenListener"
%typemap(jstype) (jobject listener, JNIEnv* env) "org.dtrain.TokenListener"
%typemap(javain) (jobject listener, JNIEnv* env) "$javainput"
%typemap(in) (jobject listener, JNIEnv* env) %{ $1 = $input; $2 = jenv; %}
