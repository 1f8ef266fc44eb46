/* lazylab backend plugin ABI (C, versioned).
 *
 * A backend is a shared object exporting one function,
 *   const lazylab_backend_api* lazylab_backend_entry(uint32_t host_major,
 *                                                    uint32_t host_minor);
 * The host refuses a plugin whose abi_major differs from its own. Minor
 * versions only append fields to the end of a struct; every struct starts
 * with struct_size, so either side can tell which fields the other knows
 * (the PJRT convention): a reader never touches a field at or past
 * struct_size.
 *
 * Version 2.0: data lives in backend-owned buffers, so a device backend
 * keeps a tensor on its device between steps. Version 1.x passed host
 * pointers to execute(); such plugins are refused on load.
 * Version 2.1 appends each kernel's description (what fusion
 * decided: kind, iteration space, how each value is indexed) to
 * lazylab_kernel; read it only when kernel.struct_size covers it
 * (lazylab_kernel_described).
 * Version 2.2 lets the host ask for each kernel's time in one execution
 * (lazylab_execute_args.profile_kernels) and read the times back from its
 * event (event_kernel_times), for per-kernel reports and rooflines.
 * Version 3.0 moves lazylab_capabilities.supports_op behind a pointer and a
 * count, so that a new op (a row appended to ops.def) is a minor version: an
 * op id at or past the count either side knows is one the backend does not
 * run, and the host never gives a backend a Program with an op it did not
 * claim. Otherwise 3.0 is 2.2.
 * Version 3.1 appends the ops real networks need: erf, gather, pad, conv2d,
 * max_pool2d and avg_pool2d; the window kernel (a conv2d with its
 * elementwise epilogue, LAZYLAB_KERNEL_WINDOW) and the capability that asks
 * for it (fuses_window_epilogue).
 * Version 3.2 appends generated_code: the code a backend generates for a
 * Program, for `lazylab show --code`.
 * Version 3.3 appends the capability fuses_layout_views: a
 * reshape that keeps the last dimension (so each row stays a row) may sit
 * inside a row-space kernel or a GEMM epilogue, where it is a view; and a
 * layout kernel may hold a chain of layout ops (transpose, slice, reshape),
 * each reading the one before, described as one strided view of the first
 * op's operand and written to the last op's result.
 * Version 3.4 appends the attention kernel
 * (LAZYLAB_KERNEL_ATTENTION): softmax(f(Q Kᵀ)) V in one kernel, f a scale
 * and an optional causal mask, described by lazylab_attention at the end of
 * lazylab_kernel; and the capability that asks for it
 * (attention_max_head_dim).
 * Version 3.5 appends executable_notes: what a backend
 * decided while compiling an executable that a report should show (the
 * candidates it timed and the one it chose, where its code came from).
 * Version 3.6 makes integer constants exact: the `value` of a
 * constant or a pad is an attribute of kind scalar (ops.def), which for an
 * integer or bool dtype lies in lazylab_attr.i, every int64 value exactly;
 * `f` still holds its nearest double (all that 3.5 gave, wrong past 2^53).
 * A SPLAT access of an integer value reads `i` of the constant `source`.
 * Every string a plugin returns is checked: a NULL name, summary, device
 * description or error is an error naming the plugin and the entry.
 * buffer_device_data, optional, tells where a buffer in device memory lies,
 * for a DLPack exchange without a copy.
 * Version 3.7 appends buffer_from_device_data, optional: a
 * buffer copied on the device from device memory another library owns (a
 * CUDA tensor of PyTorch's, through DLPack), ordered after the producer's
 * stream, with no trip through host memory; stream_wait_device and
 * device_wait_stream, optional: another library's stream made to wait for
 * the device's work (so that it reads a buffer shared through DLPack
 * without the host waiting), and the device's later work made to wait for
 * that stream (so that the buffer is freed after the stream has read it).
 * Version 3.8 appends buffer donation: the program's
 * output_donors name, per output, the parameter whose buffer the output may
 * be written into (the host checked that nothing reads that parameter once
 * the output is being written: its readers run in earlier kernels, or in the
 * output's own elementwise kernel, element for element, in ops at or before
 * the output's); execute's `donated` says which parameters the host gives up
 * with the call, and the plugin sets `taken` where an output took one's
 * memory. A plugin may ignore both (outputs then get new memory, as
 * before); one that takes a buffer must run an elementwise kernel's ops in
 * order for each element (or block of elements), and must not take memory
 * it does not own (host data it aliases).
 * Version 3.9 appends the op scatter_add (gather's adjoint: an embedding's
 * gradient).
 * Version 3.10 appends the access kind
 * LAZYLAB_ACCESS_ROW_GROUP: a value constant along each row and shared by
 * groups of rows (batch norm's per-channel [C] spread over NCHW, whose rows
 * are N * C * H), read in place by a row-space kernel rather than copied out
 * first; and the capability that asks for it (reads_row_groups).
 * Version 3.11 appends the options a backend declares
 * (lazylab_option_spec: name, kind, default, summary): the host checks a
 * user's option text against them, once, and calls create() with every
 * option spelled canonically; `lazylab backends` lists them.
 * Version 3.12 appends measure_host_ceilings: a backend that
 * computes on the host's cores (lazylab's cpu backend) measures the host's
 * ceilings (copy, elementwise and matrix-product rates; the library the
 * product ran on, and what a peer process needs to run the same library
 * kernels), so the host reads them through the ABI like a device's. The
 * dtype ids are the rows of dtypes.def (values unchanged), with
 * LAZYLAB_DTYPE_COUNT.
 * Version 3.13 appends the dtypes bf16, f16, i8 and u8 (ids 5
 * to 8; bf16 and f16 stored as lazylab/float16.hpp's 16 bits) and the
 * capability that says which dtypes a backend runs (supports_dtype, by id,
 * owned by the host like supports_op): the host gives a backend no kernel
 * with a value of another dtype, and takes a backend of an older minor
 * version to run the five dtypes before 3.13.
 * Version 3.14 appends the capability
 * gemm_epilogue_rereads: the backend runs a GEMM epilogue as a pass that
 * reads the product back from memory, so fusion leaves an epilogue whose
 * values a reduction reads to that reduction's kernel.
 * Version 3.15 appends attention kernels in 16 bits, autocast's
 * form (q, k, v and both products bf16 or f16, the softmax in f32), and the
 * capability that asks for them (attention_16_bit); and an attention kernel's
 * mask read from memory (lazylab_attention_mask: a bool [m, n] value, as
 * GPT-2's ONNX graph keeps its causal triangle) with the capability
 * attention_masks.
 * Version 3.16 (this header) appends where an attention kernel's q, k, v
 * and output lie in memory (lazylab_attention_views): a backend declaring
 * attention_views gets attention kernels that read their operands through
 * the layout ops before them (a model's heads split from its projections'
 * rows) and write the output through those after it (the heads merged
 * back), instead of a copy kernel for each.
 *
 * Objects. Every object is opaque and owned by the plugin: a backend, an
 * executable (a compiled Program), a buffer (an array of one dtype and shape
 * on one device), an event (the completion of one execution).
 *
 * Devices are numbered from 0 to device_count() - 1; buffers and executables
 * belong to one device.
 *
 * Ordering. Work on a device runs in the order it was submitted (one stream
 * per device): buffer_from_host, execute and buffer_destroy may return before
 * the device has done what they ask, and later calls see their effects.
 * buffer_to_host, event_wait and synchronize block until the work they name
 * is complete.
 *
 * Ownership.
 *   - Views passed to compile() (the Program) are read-only and valid only
 *     during that call.
 *   - buffer_from_host returns a buffer the host owns; with
 *     LAZYLAB_HOST_DATA_STAYS the host keeps `data` alive and unchanged until
 *     it destroys that buffer (a host-memory backend then aliases it: zero
 *     copy); with LAZYLAB_HOST_DATA_COPY the plugin is done with `data` when
 *     the call returns.
 *   - execute() borrows its parameter buffers and gives the host one new
 *     buffer per output, which the host owns.
 *   - The host destroys every buffer it owns exactly once, with
 *     buffer_destroy; it may do so right after the last call that uses it was
 *     made: the plugin releases the memory once queued work that reads it is
 *     done.
 *   - buffer_host_data, for a buffer in host memory, returns its address,
 *     valid until the buffer is destroyed and readable once the work that
 *     writes it is complete (the host waits first); NULL for device memory.
 *   - An event returned through execute's `done` is owned by the host, which
 *     destroys it with event_destroy.
 *   - Error strings returned through `char** error` are allocated by the
 *     plugin and released with its free_error().
 */
#ifndef LAZYLAB_BACKEND_ABI_H
#define LAZYLAB_BACKEND_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LAZYLAB_ABI_MAJOR 3u
#define LAZYLAB_ABI_MINOR 16u
#define LAZYLAB_BACKEND_ENTRY "lazylab_backend_entry"

/* Op ids: the row numbers of ops.def. */
enum lazylab_op_id {
#define LAZYLAB_OP(id, ...) LAZYLAB_OP_##id,
#include "lazylab/ops.def"
#undef LAZYLAB_OP
  LAZYLAB_OP_COUNT
};

/* Dtype ids: the row numbers of dtypes.def (F32 0, F64 1, I32 2, I64 3,
 * BOOL 4, BF16 5, F16 6, I8 7, U8 8). */
enum lazylab_dtype {
#define LAZYLAB_DTYPE(id, ...) LAZYLAB_##id,
#include "lazylab/dtypes.def"
#undef LAZYLAB_DTYPE
  LAZYLAB_DTYPE_COUNT
};

/* One attribute, in the order of the op's schema in ops.def. */
typedef struct lazylab_attr {
  int64_t i;         /* kinds int and bool; scalar of an integer or bool dtype */
  double f;          /* kind float; scalar (an integer's nearest double) */
  uint32_t num_ints; /* kind ints */
  const int64_t* ints;
} lazylab_attr;

typedef enum lazylab_value_kind {
  LAZYLAB_VALUE_PARAMETER = 0,    /* execute()'s parameters[ordinal] */
  LAZYLAB_VALUE_ARENA = 1,        /* lives in the executable's arena at `offset` */
  LAZYLAB_VALUE_KERNEL_LOCAL = 2, /* never leaves its kernel; no storage */
  LAZYLAB_VALUE_OUTPUT = 3        /* written straight into output buffer `ordinal` */
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

/* What a kernel is, as fusion made it (ABI 2.1). */
typedef enum lazylab_kernel_kind {
  LAZYLAB_KERNEL_OPAQUE = 0,        /* none of the below: run op by op */
  LAZYLAB_KERNEL_ELEMENTWISE = 1,   /* elementwise ops, constants and broadcast views over [rows, cols] */
  LAZYLAB_KERNEL_ROW_REDUCTION = 2, /* the same, with reductions over the last axis (cols) into one value per row */
  LAZYLAB_KERNEL_CONTRACTION = 3,   /* one matmul, operand transposes folded in, and a row-space epilogue */
  LAZYLAB_KERNEL_LAYOUT = 4,        /* one layout op with one operand: a strided copy (ABI 3.3: or a chain) */
  /* ABI 3.1: one conv2d and an elementwise epilogue over its result
   * [N, O, OH, OW] seen as [rows = N * O, cols = OH * OW] (a per-channel
   * value is PER_ROW; only for N = 1, where a row is a channel) */
  LAZYLAB_KERNEL_WINDOW = 5,
  /* ABI 3.4: two matmuls around a softmax over the last axis, described by
   * lazylab_attention; its other ops are the scores' scale and mask and the
   * softmax's own (max, subtract, exp, sum, divide) */
  LAZYLAB_KERNEL_ATTENTION = 6
} lazylab_kernel_kind;

/* A kernel kind's name, as reports and errors spell it ("?" for none). */
static inline const char* lazylab_kernel_kind_name(uint32_t kind) {
  static const char* const names[] = {"opaque", "elementwise", "row-reduction", "contraction",
                                      "layout", "window",      "attention"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

/* How a value's elements are indexed in the kernel's iteration space
 * [rows, cols] (point r, c; i = r * cols + c). */
typedef enum lazylab_access_kind {
  LAZYLAB_ACCESS_FULL = 0,    /* source element i */
  LAZYLAB_ACCESS_PER_ROW = 1, /* source element r */
  LAZYLAB_ACCESS_SPLAT = 2,   /* the constant `splat`, no memory */
  LAZYLAB_ACCESS_SCALAR = 3,  /* source element 0 */
  LAZYLAB_ACCESS_REPEAT = 4,  /* source element i % period (a broadcast of trailing dims) */
  /* ABI 3.10: source element (r / period) % n, n the source's element count
   * (a broadcast of leading dims other than the last onto the rows: each
   * source element is `period` consecutive rows, again every n * period) */
  LAZYLAB_ACCESS_ROW_GROUP = 5
} lazylab_access_kind;

/* One value of a row-space kernel: each op's result, and each input that an
 * op other than a broadcast reads. A broadcast's result is a view: its
 * elements come from `source`, its operand, indexed by `kind`; any other
 * value is its own source. */
typedef struct lazylab_access {
  uint32_t value;
  uint32_t kind; /* lazylab_access_kind */
  uint32_t source;
  int64_t period; /* REPEAT, ROW_GROUP */
  double splat;   /* SPLAT (integers: `i` of source's value attribute) */
} lazylab_access;

/* A contraction kernel's product: [batch..., m, k] x [batch..., k, n]. */
typedef struct lazylab_contraction {
  uint32_t matmul;        /* the matmul's result value */
  uint32_t lhs, rhs;      /* values read by the product, before any folded transpose */
  uint8_t lhs_transposed; /* the product reads lhs^T (its last two dims swapped) */
  uint8_t rhs_transposed;
  int64_t batch, m, n, k;
} lazylab_contraction;

/* A layout kernel copies the elements of `shape` (row-major; its product is
 * the result's element count): element (i0, ..., i_last) is operand element
 * offset + sum_d i_d * strides[d]. A reshape is one flat copy. */
typedef struct lazylab_layout {
  uint32_t rank;
  const int64_t* shape;
  const int64_t* strides;
  int64_t offset;
} lazylab_layout;

/* An attention kernel (ABI 3.4), per batch b (every dim before the last two,
 * flattened): scores = q[b] k[b]ᵀ ([m, d] x [d, n]); logits = scores * scale,
 * where causal is set with element (i, j) replaced by -inf for j > i;
 * output[b] = softmax(logits, over j) v[b] ([m, n] x [n, dv]). q, k and v are
 * row-major values of shapes [batch..., m, d], [batch..., n, d] (or
 * [batch..., d, n] where k_transposed is 0: the kernel's first matmul reads k
 * as it is) and [batch..., n, dv]. The scores and the softmax never leave
 * the kernel; only `output` (the second matmul's result) is written. All
 * f32; or (ABI 3.15, attention_16_bit) q, k, v and output bf16 or f16, in
 * autocast's form. A mask other than the causal one: lazylab_attention_mask.
 * ABI 3.16 (attention_views): q, k, v and output may instead name the values
 * their layout ops start from (and the output the one its layout ops end
 * in), each operand lying in that value's memory as lazylab_attention_views
 * says; without the capability they are the operands themselves. */
typedef struct lazylab_attention {
  uint32_t output;      /* the value written: the second matmul's result, or (3.16) what its views make */
  uint32_t q, k, v;     /* values read: the operands, or (3.16) what their views read */
  uint8_t k_transposed; /* k is [n, d]: the first matmul reads its transpose */
  uint8_t causal;
  int64_t batch, m, n, d, dv;
  double scale;
} lazylab_attention;

/* ABI 3.15: an attention kernel's mask read from memory: score (i, j) of
 * every batch is kept where mask[i, j] (a bool [m, n] value, row-major) is
 * keep_where, and is -inf elsewhere, after the scale. value is
 * LAZYLAB_NO_MASK where the kernel has no such mask (causal, or none). */
#define LAZYLAB_NO_MASK 0xffffffffu
typedef struct lazylab_attention_mask {
  uint32_t value;
  uint8_t keep_where; /* 1: keep where the mask is true; 0: where it is false */
} lazylab_attention_mask;

/* ABI 3.16: where an attention kernel's operand lies in the memory of the
 * value lazylab_attention names for it. Element (b_0, ..., b_{r-1}, i, c)
 * of the operand as lazylab_attention describes it (q [batch..., m, d]; k
 * [batch..., n, d] where k_transposed is 1, else [batch..., d, n]; v
 * [batch..., n, dv]; output [batch..., m, dv]) is element
 * offset + sum_j b_j batch_strides[j] + i row_stride + c of that value: the
 * last dim contiguous. */
typedef struct lazylab_attention_view {
  int64_t offset;
  int64_t row_stride;
  const int64_t* batch_strides; /* batch_rank entries */
} lazylab_attention_view;

/* ABI 3.16: an attention kernel's four views, over its batch dims
 * (batch_shape, batch_rank entries, their product lazylab_attention's
 * batch). Without attention_views every view is its value's row-major
 * layout: the value is the operand itself. */
typedef struct lazylab_attention_views {
  uint32_t batch_rank;
  const int64_t* batch_shape;
  lazylab_attention_view q, k, v, output;
} lazylab_attention_views;

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
  /* ABI 2.1: the description. */
  uint32_t kind; /* lazylab_kernel_kind */
  int64_t rows, cols;
  uint32_t num_accesses;
  const lazylab_access* accesses; /* ELEMENTWISE, ROW_REDUCTION, CONTRACTION (its epilogue) */
  lazylab_contraction contraction;
  lazylab_layout layout;
  lazylab_attention attention;             /* ABI 3.4: ATTENTION */
  lazylab_attention_mask attention_mask;   /* ABI 3.15: ATTENTION */
  lazylab_attention_views attention_views; /* ABI 3.16: ATTENTION */
} lazylab_kernel;

#define lazylab_kernel_described(kernel) \
  ((kernel)->struct_size >= offsetof(lazylab_kernel, layout) + sizeof(lazylab_layout))
#define lazylab_kernel_has_attention(kernel) \
  ((kernel)->struct_size >= offsetof(lazylab_kernel, attention) + sizeof(lazylab_attention))
/* The value of an attention kernel's mask read from memory, or
 * LAZYLAB_NO_MASK (none, or a host before 3.15). */
#define lazylab_kernel_attention_mask(kernel)                                                         \
  ((kernel)->struct_size >= offsetof(lazylab_kernel, attention_mask) + sizeof(lazylab_attention_mask) \
       ? (kernel)->attention_mask.value                                                               \
       : LAZYLAB_NO_MASK)
/* An attention kernel's views (ABI 3.16), or NULL from a host before 3.16
 * (every operand its value's row-major layout). */
#define lazylab_kernel_attention_views(kernel)                                                          \
  ((kernel)->struct_size >= offsetof(lazylab_kernel, attention_views) + sizeof(lazylab_attention_views) \
       ? &(kernel)->attention_views                                                                     \
       : (const lazylab_attention_views*)0)

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
  /* ABI 3.8: num_outputs entries, or NULL: the parameter ordinal whose
   * buffer each output may take when the host donates it, or -1. */
  const int32_t* output_donors;
} lazylab_program;

#define lazylab_program_donors(program)                                                           \
  ((program)->struct_size >= offsetof(lazylab_program, output_donors) + sizeof(const int32_t*) && \
           (program)->output_donors                                                               \
       ? (program)->output_donors                                                                 \
       : (const int32_t*)NULL)

/* What fusion strategies may ask of a backend. The host owns supports_op:
 * num_ops entries, zeroed; the backend sets those of the ops it runs, never
 * touching an entry at or past num_ops (a host older than the backend knows
 * fewer ops). */
typedef struct lazylab_capabilities {
  size_t struct_size;
  uint32_t num_ops;            /* entries in supports_op: the host's LAZYLAB_OP_COUNT */
  uint8_t* supports_op;        /* by op id; nonzero: can run this op */
  uint32_t max_ops_per_kernel; /* 0: no limit */
  uint8_t fuses_elementwise;   /* runs chains of elementwise ops as one kernel */
  uint8_t fuses_reduction_prologue;
  uint8_t fuses_gemm_epilogue;
  uint8_t fuses_window_epilogue; /* ABI 3.1: runs LAZYLAB_KERNEL_WINDOW kernels */
  /* ABI 3.3: runs, inside row-space kernels and GEMM epilogues, reshapes
   * that keep the last dimension: the description gives such a reshape the
   * access of its operand (Full, source = the operand), a view of the same
   * elements in the same order. And runs layout kernels of several ops: the
   * layout is a view of ops[0]'s operand, the result is the last op's. */
  uint8_t fuses_layout_views;
  /* ABI 3.4: runs LAZYLAB_KERNEL_ATTENTION kernels whose d and dv are at
   * most this; 0: none. */
  uint32_t attention_max_head_dim;
  /* ABI 3.10: runs row-space kernels (and GEMM and window epilogues) that
   * read a value through LAZYLAB_ACCESS_ROW_GROUP. */
  uint8_t reads_row_groups;
  /* ABI 3.13: the dtypes it runs, by dtype id: num_dtypes entries (the
   * host's LAZYLAB_DTYPE_COUNT), owned by the host as supports_op is and set
   * to the five dtypes before 3.13 (F32 to BOOL) when the host asks; the
   * backend sets or clears them, never touching an entry at or past
   * num_dtypes. */
  uint32_t num_dtypes;
  uint8_t* supports_dtype;
  /* ABI 3.14: its GEMM epilogues (past what the product's library applies
   * itself, a bias or a scale) run as a pass that reads the written product
   * back, not as the product is computed. A fusion strategy then leaves an
   * epilogue whose values reach a reduction to that reduction's kernel, as
   * its prologue: the product is written once either way, and the
   * epilogue's result (a softmax's scaled, masked scores) is never written.
   * 0 before 3.14. */
  uint8_t gemm_epilogue_rereads;
  /* ABI 3.15: runs LAZYLAB_KERNEL_ATTENTION kernels whose q, k and v are
   * bf16 or f16 (of the dtypes it runs). Such a kernel is autocast's form:
   * both products in that dtype (f32 sums rounded to it), the scores times
   * the scale rounded to it (the scale given as that dtype holds it) and
   * masked in it, the softmax computed in f32 over them widened, the
   * probabilities rounded to it for the second product; the output in that
   * dtype. 0 before 3.15: attention kernels in f32 only. */
  uint8_t attention_16_bit;
  /* ABI 3.15: runs LAZYLAB_KERNEL_ATTENTION kernels whose mask is read from
   * memory (lazylab_attention_mask). 0 before 3.15. */
  uint8_t attention_masks;
  /* ABI 3.16: runs LAZYLAB_KERNEL_ATTENTION kernels whose operands and
   * output lie in memory as lazylab_attention_views says, not only
   * row-major: fusion then takes the reshapes, transposes and slices that
   * make q, k and v, and the reshapes and transposes that read the output,
   * into the attention kernel. 0 before 3.16. */
  uint8_t attention_views;
} lazylab_capabilities;

typedef struct lazylab_backend lazylab_backend;       /* opaque, plugin-owned */
typedef struct lazylab_executable lazylab_executable; /* opaque, plugin-owned */
typedef struct lazylab_buffer lazylab_buffer;         /* opaque, plugin-owned */
typedef struct lazylab_event lazylab_event;           /* opaque, plugin-owned */

typedef enum lazylab_host_data {
  LAZYLAB_HOST_DATA_COPY = 0, /* the plugin copies (or uploads) before returning */
  LAZYLAB_HOST_DATA_STAYS = 1 /* alive and unchanged until the buffer is destroyed */
} lazylab_host_data;

typedef struct lazylab_buffer_from_host_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t rank;
  const int64_t* shape;
  int32_t device;
  const void* data;       /* row-major, exactly the bytes of dtype x shape */
  uint32_t host_data;     /* lazylab_host_data */
  lazylab_buffer* buffer; /* out */
} lazylab_buffer_from_host_args;

/* ABI 3.7: device memory of another library's, to copy into a new buffer. */
typedef struct lazylab_buffer_from_device_args {
  size_t struct_size;
  uint32_t dtype;
  uint32_t rank;
  const int64_t* shape;
  int32_t device;             /* the device `data` lies on, and the buffer's */
  const void* data;           /* row-major, exactly the bytes of dtype x shape */
  int32_t dlpack_device_type; /* where `data` lies (kDLCUDA = 2) */
  uint64_t stream;            /* the producer's stream on that device (a CUstream; 0: the legacy default one) */
  lazylab_buffer* buffer;     /* out */
} lazylab_buffer_from_device_args;

typedef struct lazylab_compile_args {
  size_t struct_size;
  const lazylab_program* program;
  int32_t device;
  lazylab_executable* executable; /* out */
} lazylab_compile_args;

/* A device's own ceilings, measured by its backend (ABI 2.1); 0 where the
 * backend did not measure one. `method` says how (plugin-owned, static). */
typedef struct lazylab_ceilings {
  size_t struct_size;
  double copy_gb_s;    /* device memory: bytes read + written per second, in GB */
  double gemm_gflop_s; /* f32 matrix product, as the backend runs it */
  const char* method;
} lazylab_ceilings;

/* ABI 3.12: the host machine's ceilings, measured by a backend that computes
 * on the host's cores in host memory: the rates a host-memory cell's floor is
 * read against. 0 where the backend did not measure one. The strings are
 * plugin-owned, valid until the backend is destroyed (never NULL once
 * written). */
typedef struct lazylab_host_ceilings {
  size_t struct_size;
  double copy_gb_s;         /* host memory: bytes read + written per second, in GB, all hardware threads */
  double elementwise_gop_s; /* simple f32 ops (add, mul, max) on data in registers, all hardware threads */
  double gemm_gflop_s;      /* f32 matrix product, as the backend runs it, all hardware threads */
  const char* gemm_library; /* the library and kernels of that product, or why there is none */
  const char* method;       /* how they were measured */
  /* NAME=value lines (separated by '\n'; "" for none) that a peer process on
   * this host (PyTorch, say) runs with so that it uses the same library
   * kernels as the backend: OPENBLAS_CORETYPE=SkylakeX. */
  const char* peer_environment;
} lazylab_host_ceilings;

typedef struct lazylab_execute_args {
  size_t struct_size;
  lazylab_executable* executable;
  uint32_t num_parameters;
  lazylab_buffer* const* parameters; /* by ordinal; on the executable's device */
  uint32_t num_outputs;
  lazylab_buffer** outputs; /* out: one new buffer per output, in root order */
  lazylab_event** done;     /* optional (may be NULL): out, the completion of this execution */
  /* ABI 2.2: nonzero asks the backend to time each kernel of this execution
   * (it may cost time: the host asks only on steps it does not time as a
   * whole); the times come back through `done`'s event_kernel_times. */
  uint32_t profile_kernels;
  /* ABI 3.8: num_parameters entries each, or NULL. donated[p] nonzero: the
   * host gives parameter p's buffer up with this call (it reads it no more
   * and destroys its handle after the call); the plugin sets taken[p] to 1
   * where an output took that buffer's memory (program.output_donors). */
  const uint8_t* donated;
  uint8_t* taken;
} lazylab_execute_args;

/* The host's donated and taken arrays (NULL from a host before 3.8). */
#define lazylab_execute_args_donated(args) \
  ((args)->struct_size >= offsetof(lazylab_execute_args, taken) + sizeof(uint8_t*) ? (args)->donated : NULL)
#define lazylab_execute_args_taken(args) \
  ((args)->struct_size >= offsetof(lazylab_execute_args, taken) + sizeof(uint8_t*) ? (args)->taken : NULL)

/* Whether the host's execute args carry profile_kernels (a 2.0 or 2.1 host's
 * do not). */
#define lazylab_execute_args_profile(args)                                                      \
  ((args)->struct_size >= offsetof(lazylab_execute_args, profile_kernels) + sizeof(uint32_t) && \
   (args)->profile_kernels != 0)

/* ABI 3.11: one option a backend's create() accepts. The layout is fixed:
 * a later minor version that needs more says so in a new array. */
typedef enum lazylab_option_kind {
  LAZYLAB_OPTION_INT = 0,   /* a decimal integer, at least min_value */
  LAZYLAB_OPTION_BOOL = 1,  /* true, false, on, off, 1 or 0 */
  LAZYLAB_OPTION_ENUM = 2,  /* one of `choices` */
  LAZYLAB_OPTION_STRING = 3 /* any text without a comma */
} lazylab_option_kind;

typedef struct lazylab_option_spec {
  const char* name;          /* as written in "name=value" */
  uint32_t kind;             /* lazylab_option_kind */
  const char* default_value; /* a value of the kind ("" for a STRING that has none) */
  const char* summary;       /* one line */
  const char* choices;       /* ENUM: the values allowed, separated by '|'; else NULL */
  int64_t min_value;         /* INT: the least value allowed */
} lazylab_option_spec;

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
  int32_t (*device_count)(const lazylab_backend* backend);

  /* Each returns 0 on success, else nonzero with *error set. */
  int (*compile)(lazylab_backend* backend, lazylab_compile_args* args, char** error);
  void (*destroy_executable)(lazylab_executable* executable);
  int (*execute)(lazylab_backend* backend, lazylab_execute_args* args, char** error);

  int (*buffer_from_host)(lazylab_backend* backend, lazylab_buffer_from_host_args* args, char** error);
  /* Blocks until the buffer's data is in `destination` (its bytes). */
  int (*buffer_to_host)(lazylab_backend* backend, lazylab_buffer* buffer, void* destination, char** error);
  const void* (*buffer_host_data)(lazylab_buffer* buffer);
  void (*buffer_destroy)(lazylab_backend* backend, lazylab_buffer* buffer);

  int (*event_wait)(lazylab_event* event, char** error);
  /* The execution's time on the device in milliseconds, measured there (CUDA
   * events, say); host backends give its wall time. Only after event_wait;
   * negative when the backend cannot tell. */
  double (*event_elapsed_ms)(lazylab_event* event);
  void (*event_destroy)(lazylab_event* event);
  /* Blocks until every call on `device` so far has completed. */
  int (*synchronize)(lazylab_backend* backend, int32_t device, char** error);

  void (*free_error)(char* error);

  /* ABI 2.1, optional (NULL: none): measures the device's ceilings. */
  int (*measure_ceilings)(lazylab_backend* backend, int32_t device, lazylab_ceilings* out, char** error);

  /* ABI 2.2, optional (NULL: none). After event_wait, for an execution run
   * with profile_kernels: writes the milliseconds each kernel took, in the
   * Program's kernel order, to ms[0 .. min(count, capacity)) and returns
   * count, the number of kernels timed (the Program's num_kernels); 0 when
   * the execution was not profiled or the backend cannot time its kernels. */
  uint32_t (*event_kernel_times)(lazylab_event* event, double* ms, uint32_t capacity);

  /* ABI 3.2, optional (NULL: none). The code the backend generates for
   * `program` (its CUDA C++, say), each kernel's part marked, as text in
   * *text that the host frees with free_error; an empty text when the backend
   * generates none. Returns 0, else nonzero with *error set. */
  int (*generated_code)(lazylab_backend* backend, const lazylab_program* program, char** text, char** error);

  /* ABI 3.5, optional (NULL: none). What the backend decided while compiling
   * `executable` that a reader of a report should see, one line a decision:
   * each choice it made by timing candidates (an algorithm, a block shape),
   * with the candidates' times and whether they were timed now or read from
   * a cache, and where its code came from. Text in *text that the host frees
   * with free_error; empty when there is nothing to say. Returns 0, else
   * nonzero with *error set. */
  int (*executable_notes)(lazylab_executable* executable, char** text, char** error);

  /* ABI 3.6, optional (NULL: none). Where a buffer in device memory lies, so
   * that an exchange (DLPack) can share it without a copy: its address in
   * *data and its DLPack device type in *dlpack_device_type (kDLCUDA = 2),
   * the device being the buffer's own index. Returns 0 where there is none to
   * share (host memory: buffer_host_data gives it). The address is valid
   * until buffer_destroy; the data is complete once the work writing it is
   * (synchronize). */
  int (*buffer_device_data)(lazylab_buffer* buffer, void** data, int32_t* dlpack_device_type);

  /* ABI 3.7, optional (NULL: none). A new buffer, owned by the host, holding
   * a copy of args->data made on the device: the copy reads the data after
   * the work queued on args->stream so far, and work queued on args->stream
   * after this call runs after the copy has read it (so the producer may
   * overwrite its memory then). Returns 0, else nonzero with *error set (a
   * backend whose buffers lie in host memory, or data on a device type it
   * cannot reach, says so). */
  int (*buffer_from_device_data)(lazylab_backend* backend, lazylab_buffer_from_device_args* args, char** error);

  /* ABI 3.7, optional (NULL: the host synchronizes instead). Work queued on
   * another library's `stream` of `device` (a CUstream; 0: the legacy
   * default one) after this call runs after all the work queued on the
   * device so far. Returns 0, else nonzero with *error set. */
  int (*stream_wait_device)(lazylab_backend* backend, int32_t device, uint64_t stream, char** error);

  /* ABI 3.7, optional (NULL: none). Work queued on `device` after this call
   * (freeing a buffer, say) runs after the work queued on another library's
   * `stream` so far. Returns 0, else nonzero with *error set. */
  int (*device_wait_stream)(lazylab_backend* backend, int32_t device, uint64_t stream, char** error);

  /* ABI 3.11, optional (NULL or none: create() gets the user's text as
   * written). The options create() accepts, valid while the plugin is
   * loaded. The host checks a user's text against them (a name that is none
   * of them gets the nearest; a value, its kind's check) and calls create()
   * with every option, in this order, as "name=value,..." with the defaults
   * filled in. */
  const lazylab_option_spec* options;
  uint32_t num_options;

  /* ABI 3.12, optional (NULL: the backend does not measure the host). The
   * host's ceilings; `quick` 0 asks for the best of several trials of each
   * (about a second, at the start of a run), nonzero for one trial of the
   * copy and the product (milliseconds: the host takes one a timed round, so
   * that a cell's floor can be read under the conditions its steps ran in;
   * elementwise_gop_s may then be 0). Returns 0, else nonzero with *error
   * set. */
  int (*measure_host_ceilings)(lazylab_backend* backend, uint32_t quick, lazylab_host_ceilings* out, char** error);
} lazylab_backend_api;

typedef int (*lazylab_host_ceilings_fn)(lazylab_backend* backend, uint32_t quick, lazylab_host_ceilings* out,
                                        char** error);

typedef const lazylab_backend_api* (*lazylab_backend_entry_fn)(uint32_t host_major, uint32_t host_minor);

#ifdef __cplusplus
}
#endif

#endif
