/* dtrain_java.i: the Java part of dtrain.i (read before the header, see dtrain.i).
 *
 *   swig -java -package org.dtrain.internal -outdir <gen>/org/dtrain/internal \
 *        -I<prefix>/include -o <gen>/dtrain_wrap.c bindings/swig/dtrain.i
 *
 * The generated layer, org.dtrain.internal.DtrainNative, is the C API with Java types:
 *  - every handle (dt_tensor*, dt_mesh*, ...) is a plain `long`; no proxy classes, so
 *    nothing is finalized behind the host's back (org.dtrain's classes own the handles);
 *  - a dt_status other than DT_OK throws org.dtrain.DtrainException(status, message) from
 *    the C side of the same native call, after every array and string was released, with
 *    the message of dt_last_error_message() read on the thread that failed
 *    (DT_ERR_CANCELLED: its subclass org.dtrain.CancelledException);
 *  - an out-handle or out-value (`dt_xxx** out`, `int64_t* out`, `const char** out`, ...)
 *    is the return value; functions with two or three outputs return a long[] (an int64_t
 *    is never a double on its way to Java);
 *  - the JSON writers (buf, capacity, needed) return a String, as do the text writers of
 *    the tokenizer (decode, chat template, detokenizer); its encode returns an int[];
 *  - tensor copies take float[], int[], long[], short[], byte[], double[] (critical
 *    regions: no copy on HotSpot) or a direct java.nio.ByteBuffer (its address, no copy);
 *    a tensor can also borrow a direct ByteBuffer's memory, or lend its own as one;
 *  - the token callback is version 2 (it stops the generation once the listener threw)
 *    and a dt_cancel is a `long` like every handle.
 * The helpers are `dtj_*` C functions; those that replace a C function keep its name in
 * Java (%rename), e.g. DtrainNative.dt_tensor_shape(long) returns a long[].
 *
 * This file holds the module, the error path (dt_status to DtrainException) and what each
 * call returns; it %includes, from this directory, in the order they must be read:
 *   dtrain_java_types.i    how each C type crosses (handles, strings, out-values, arrays,
 *                          ByteBuffers, the listener): every typemap but dt_status's, and
 *                          the string conversions the error path below uses;
 *   dtrain_java_helpers.i  the dtj_* helpers, what they replace, and their declarations
 *                          (last: they use all of the above).
 */
%module(jniclassname="DtrainNativeJNI") DtrainNative

/* Let SWIG's int64_t be C's (long on LP64 Linux, the platform of this binding) so that no
 * call casts an int64_t* to a long long*; a C long is a Java long here. */
#define SWIGWORDSIZE64
%include <stdint.i>
%apply long long { long };

%javaconst(1);
%pragma(java) moduleclassmodifiers="public final class"
%pragma(java) jniclassclassmodifiers="final class"
%pragma(java) jniclasscode=%{
  static {
    NativeLoader.load();
  }
%}
/* Pointer types that reach no typemap would become SWIGTYPE_p_ proxy classes; the build
 * checks that none is generated, and none of them may finalize anything. */
%typemap(javafinalize) SWIGTYPE ""

%{
#include <dtrain/dtrain.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
%}

%include "dtrain_java_types.i"

/* ---------------------------------------------------------------------------------- */
/* The error path                                                                       */
/* ---------------------------------------------------------------------------------- */
%{
/* A failure found by a helper before or instead of a library call: its message, which
 * dtj_throw prefers to dt_last_error_message() (both are this thread's). */
static _Thread_local const char* dtj_own_error = NULL;

static dt_status dtj_fail(dt_status status, const char* message) {
  dtj_own_error = message;
  return status;
}

/* Throws org.dtrain.DtrainException(status, message), or for DT_ERR_CANCELLED its subclass
 * org.dtrain.CancelledException(message), unless a Java exception is already pending (a
 * listener's own exception wins). Called in the same native call that failed. */
static void dtj_throw(JNIEnv* env, dt_status status) {
  const char* message = dtj_own_error ? dtj_own_error : dt_last_error_message();
  int cancelled = status == DT_ERR_CANCELLED;
  jclass cls;
  jmethodID ctor;
  jstring jmessage;
  jobject ex;
  dtj_own_error = NULL;
  if ((*env)->ExceptionCheck(env)) return;
  cls = (*env)->FindClass(env, cancelled ? "org/dtrain/CancelledException"
                                         : "org/dtrain/DtrainException");
  if (!cls) return; /* NoClassDefFoundError is pending */
  ctor = (*env)->GetMethodID(env, cls, "<init>",
                             cancelled ? "(Ljava/lang/String;)V" : "(ILjava/lang/String;)V");
  if (ctor) {
    jmessage = dtj_new_string(env, message ? message : "");
    if (jmessage) {
      ex = cancelled ? (*env)->NewObject(env, cls, ctor, jmessage)
                     : (*env)->NewObject(env, cls, ctor, (jint)status, jmessage);
      if (ex) {
        (*env)->Throw(env, (jthrowable)ex);
        (*env)->DeleteLocalRef(env, ex);
      }
      (*env)->DeleteLocalRef(env, jmessage);
    }
  }
  (*env)->DeleteLocalRef(env, cls);
}
%}

/* dt_status: void in Java, or the value of the call's output (DTJ_RETURNS below);
 * non-OK throws DtrainException once the arguments are released ("ret" runs last). */
%typemap(jni) dt_status "void"
%typemap(jtype) dt_status "void"
%typemap(jstype) dt_status "void"
%typemap(javaout) dt_status { $jnicall; }
%typemap(out) dt_status ""
%typemap(ret) dt_status %{
  if ($1 != DT_OK) dtj_throw(jenv, $1);
%}
/* ... except as the argument of dt_status_string. */
%apply int { dt_status status };

%define DTJ_RETURNS(FUNC, JNITYPE, JAVATYPE)
%typemap(jni) dt_status FUNC "JNITYPE"
%typemap(jtype) dt_status FUNC "JAVATYPE"
%typemap(jstype) dt_status FUNC "JAVATYPE"
%typemap(javaout) dt_status FUNC { return $jnicall; }
%enddef

/* ---------------------------------------------------------------------------------- */
/* What each call returns in Java                                                       */
/* ---------------------------------------------------------------------------------- */
DTJ_RETURNS(dt_options_create, jlong, long)
DTJ_RETURNS(dt_tensor_create, jlong, long)
DTJ_RETURNS(dt_tensor_create_on_mesh, jlong, long)
DTJ_RETURNS(dt_tensor_piece, jlong, long)
DTJ_RETURNS(dt_mesh_create, jlong, long)
DTJ_RETURNS(dt_module_create_gpt, jlong, long)
DTJ_RETURNS(dt_module_create_mlp, jlong, long)
DTJ_RETURNS(dt_module_create_sequential, jlong, long)
DTJ_RETURNS(dt_module_create_from_checkpoint, jlong, long)
DTJ_RETURNS(dt_module_param, jlong, long)
DTJ_RETURNS(dt_module_forward, jlong, long)
DTJ_RETURNS(dt_module_backward, jlong, long)
DTJ_RETURNS(dt_optimizer_create, jlong, long)
DTJ_RETURNS(dt_engine_create, jlong, long)
DTJ_RETURNS(dt_dataset_create, jlong, long)
DTJ_RETURNS(dt_loader_create, jlong, long)
DTJ_RETURNS(dt_server_create, jlong, long)
DTJ_RETURNS(dtj_server_submit, jlong, long)
DTJ_RETURNS(dtj_loss_with_grad, jlong, long)
DTJ_RETURNS(dt_cancel_create, jlong, long)
DTJ_RETURNS(dtj_tensor_wrap_buffer, jlong, long)
DTJ_RETURNS(dt_module_create_from_hf, jlong, long)
DTJ_RETURNS(dt_tokenizer_create, jlong, long)
DTJ_RETURNS(dt_detokenizer_create, jlong, long)
DTJ_RETURNS(dt_tokenizer_vocab_size, jlong, long)

DTJ_RETURNS(dt_options_get_int, jlong, long)
DTJ_RETURNS(dt_options_count, jlong, long)
DTJ_RETURNS(dt_tensor_numel, jlong, long)
DTJ_RETURNS(dt_tensor_nbytes, jlong, long)
DTJ_RETURNS(dt_module_param_count, jlong, long)
DTJ_RETURNS(dt_module_gpt_param_count, jlong, long)
DTJ_RETURNS(dt_module_param_count_tensors, jlong, long)
DTJ_RETURNS(dt_engine_step, jlong, long)
DTJ_RETURNS(dt_dataset_size, jlong, long)
DTJ_RETURNS(dt_dataset_context, jlong, long)
DTJ_RETURNS(dt_loader_batches_per_epoch, jlong, long)
DTJ_RETURNS(dt_mesh_comm_wire_bytes, jlong, long)

DTJ_RETURNS(dt_options_get_bool, jint, int)
DTJ_RETURNS(dt_tensor_dtype, jint, int)
DTJ_RETURNS(dt_tensor_ndim, jint, int)
DTJ_RETURNS(dt_tensor_piece_count, jint, int)
DTJ_RETURNS(dt_device_count, jint, int)
DTJ_RETURNS(dt_mesh_world_size, jint, int)
DTJ_RETURNS(dt_mesh_local_rank_count, jint, int)
DTJ_RETURNS(dt_mesh_local_rank, jint, int)
DTJ_RETURNS(dt_mesh_axis_size, jint, int)
DTJ_RETURNS(dt_mesh_coord, jint, int)
DTJ_RETURNS(dt_cancel_is_requested, jint, int)
DTJ_RETURNS(dt_tokenizer_token_to_id, jint, int)

DTJ_RETURNS(dt_options_get_double, jdouble, double)
DTJ_RETURNS(dt_engine_train_step, jdouble, double)
DTJ_RETURNS(dt_engine_eval, jdouble, double)
DTJ_RETURNS(dtj_loss, jdouble, double)

DTJ_RETURNS(dt_options_get_string, jstring, String)
DTJ_RETURNS(dt_tensor_device, jstring, String)
DTJ_RETURNS(dt_mesh_backend, jstring, String)
DTJ_RETURNS(dt_module_param_name, jstring, String)
DTJ_RETURNS(dtj_memory_report_json, jstring, String)
DTJ_RETURNS(dtj_mesh_comm_report_json, jstring, String)
DTJ_RETURNS(dtj_mesh_comm_history_json, jstring, String)
DTJ_RETURNS(dtj_engine_last_stats_json, jstring, String)
DTJ_RETURNS(dtj_engine_last_generate_stats_json, jstring, String)
DTJ_RETURNS(dtj_checkpoint_info_json, jstring, String)
DTJ_RETURNS(dtj_server_stats_json, jstring, String)
DTJ_RETURNS(dtj_server_metrics_text, jstring, String)
DTJ_RETURNS(dtj_hf_inspect_json, jstring, String)
DTJ_RETURNS(dtj_runtime_info_json, jstring, String)
DTJ_RETURNS(dtj_tokenizer_decode, jstring, String)
DTJ_RETURNS(dtj_tokenizer_info_json, jstring, String)
DTJ_RETURNS(dtj_tokenizer_apply_chat_template, jstring, String)
DTJ_RETURNS(dtj_detokenizer_text, jstring, String)
DTJ_RETURNS(dtj_plan_json, jstring, String)
DTJ_RETURNS(dtj_pipeline_schedule_json, jstring, String)
DTJ_RETURNS(dtj_cluster_calibrate_json, jstring, String)
DTJ_RETURNS(dtj_cluster_median_json, jstring, String)

DTJ_RETURNS(dtj_tokenizer_encode, jintArray, int[])

DTJ_RETURNS(dtj_tensor_shape, jlongArray, long[])
DTJ_RETURNS(dtj_memory_stats, jlongArray, long[])
DTJ_RETURNS(dtj_memory_rank_stats, jlongArray, long[])
DTJ_RETURNS(dtj_loader_position, jlongArray, long[])
DTJ_RETURNS(dtj_server_poll, jlongArray, long[])
DTJ_RETURNS(dtj_server_model_info, jlongArray, long[])
DTJ_RETURNS(dtj_mesh_comm_stats, jlongArray, long[])

DTJ_RETURNS(dtj_tensor_buffer, jobject, java.nio.ByteBuffer)

%include "dtrain_java_helpers.i"
