/* lazylab backend plugin ABI (C, versioned).
 *
 * A backend is a shared object exporting one function,
 *   const lazylab_backend_api* lazylab_backend_entry(uint32_t host_major,
 *                                                    uint32_t host_minor);
 * The host refuses a plugin whose abi_major differs from its own. Minor
 * versions only append fields; every struct starts with struct_size so either
 * side can tell which fields the other knows (the PJRT convention).
 *
 * Ownership: views passed to compile() are read-only and valid only during
 * that call. Error strings returned through `char** error` are allocated by
 * the plugin and released with its free_error().
 */
#ifndef LAZYLAB_BACKEND_ABI_H
#define LAZYLAB_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAZYLAB_ABI_MAJOR 1u
#define LAZYLAB_ABI_MINOR 0u
#define LAZYLAB_BACKEND_ENTRY "lazylab_backend_entry"

/* Op ids: the row numbers of ops.def. */
enum lazylab_op_id {
#define LAZYLAB_OP(id, name, category, arity, type_rule, schema) LAZYLAB_OP_##id,
#include "lazylab/ops.def"
#undef LAZYLAB_OP
  LAZYLAB_OP_COUNT
};

enum lazylab_dtype { LAZYLAB_F32 = 0, LAZYLAB_F64 = 1, LAZYLAB_I32 = 2, LAZYLAB_I64 = 3, LAZYLAB_BOOL = 4 };

/* One attribute, in the order of the op's schema in ops.def. */
typedef struct lazylab_attr {
  int64_t i;         /* kinds int and bool */
  double f;          /* kind float */
  uint32_t num_ints; /* kind ints */
  const int64_t* ints;
} lazylab_attr;

typedef enum lazylab_value_kind {
  LAZYLAB_VALUE_PARAMETER = 0,    /* bound by the host at execute, by ordinal */
  LAZYLAB_VALUE_ARENA = 1,        /* lives in the arena at `offset` */
  LAZYLAB_VALUE_KERNEL_LOCAL = 2, /* never leaves its kernel; no storage */
  LAZYLAB_VALUE_OUTPUT = 3        /* written straight into execute()'s outputs[ordinal] */
} lazylab_value_kind;

/* A value is the result of one node; value id == node id. */
typedef struct lazylab_value {
  size_t struct_size;
  uint32_t dtype;
  uint32_t rank;
  const int64_t* shape;
  uint32_t kind;   /* lazylab_value_kind */
  int64_t ordinal; /* parameters and outputs */
  uint64_t offset; /* arena values only */
  uint64_t bytes;
} lazylab_value;

typedef struct lazylab_op {
  size_t struct_size;
  uint32_t op;     /* lazylab_op_id */
  uint32_t result; /* value id */
  uint32_t num_operands;
  const uint32_t* operands; /* value ids */
  uint32_t num_attrs;
  const lazylab_attr* attrs;
} lazylab_op;

/* A kernel runs its ops in order; inputs/outputs are the values that cross
 * its boundary. */
typedef struct lazylab_kernel {
  size_t struct_size;
  uint32_t num_ops;
  const lazylab_op* ops;
  uint32_t num_inputs;
  const uint32_t* inputs;
  uint32_t num_outputs;
  const uint32_t* outputs;
} lazylab_kernel;

typedef struct lazylab_program {
  size_t struct_size;
  uint32_t num_values;
  const lazylab_value* values;
  uint32_t num_kernels;
  const lazylab_kernel* kernels; /* in execution order */
  uint32_t num_parameters;
  const uint32_t* parameters; /* value ids, by ordinal */
  uint32_t num_outputs;
  const uint32_t* outputs; /* value ids, in root order */
  uint64_t arena_bytes;
} lazylab_program;

/* What fusion strategies may ask of a backend. */
typedef struct lazylab_capabilities {
  size_t struct_size;
  uint8_t supports_op[LAZYLAB_OP_COUNT]; /* nonzero: can run this op */
  uint32_t max_ops_per_kernel;           /* 0: no limit */
  uint8_t fuses_elementwise;             /* runs chains of elementwise ops as one kernel */
  uint8_t fuses_reduction_prologue;
  uint8_t fuses_gemm_epilogue;
} lazylab_capabilities;

typedef struct lazylab_backend lazylab_backend;       /* opaque, plugin-owned */
typedef struct lazylab_executable lazylab_executable; /* opaque, plugin-owned */

typedef struct lazylab_backend_api {
  size_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  const char* name;
  const char* summary;

  /* options: "key=value,key=value" (may be empty). NULL plus *error on failure. */
  lazylab_backend* (*create)(const char* options, char** error);
  void (*destroy)(lazylab_backend* backend);
  /* Writes the backend's capabilities; caps->struct_size is set by the host. */
  void (*capabilities)(const lazylab_backend* backend, lazylab_capabilities* caps);
  /* A short description of the device and build for reports. */
  const char* (*device_description)(const lazylab_backend* backend);

  lazylab_executable* (*compile)(lazylab_backend* backend, const lazylab_program* program, char** error);
  void (*destroy_executable)(lazylab_executable* executable);
  /* parameters[i] points to parameter ordinal i; outputs[i] receives output i.
   * Buffers are host memory of exactly the value's bytes. An output whose value
   * is not LAZYLAB_VALUE_OUTPUT with that ordinal (a parameter, or a value
   * returned twice) is copied there by the backend. Returns 0 on success. */
  int (*execute)(lazylab_executable* executable, const void* const* parameters, void* const* outputs, char** error);

  void (*free_error)(char* error);
} lazylab_backend_api;

typedef const lazylab_backend_api* (*lazylab_backend_entry_fn)(uint32_t host_major, uint32_t host_minor);

#ifdef __cplusplus
}
#endif

#endif
