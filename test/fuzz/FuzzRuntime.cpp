//===- FuzzRuntime.cpp - libFuzzer target: the runtime's argument checks --===//
//
// attn-fuzz-runtime: random tensor descriptors against the kernels of
// test/unit/runtime/fake_kernels.c (linked in, registered through
// attn_module_from_library: no dlopen). Each input starts from a valid call
// for one kernel and applies a list of edits: any shape, stride, element
// type (invalid enum values too) or rank; a NULL tensor or NULL data; data
// that points into another tensor's buffer; a pointer no buffer backs.
//
// attn_prepare_with must either refuse with a message, or accept a call that
// touches only memory the descriptors name. Two oracles check that:
//  - on success, this file recomputes, in 128-bit arithmetic and
//    independently of runtime/src/check.c, what the call must satisfy
//    (shapes, element types, extents inside the address space, outputs
//    disjoint from everything else) and traps if anything fails;
//  - the call then runs with every buffer allocated at exactly the extent
//    its descriptor names, so AddressSanitizer reports any access outside
//    it, by the checks or by the kernel.
//
//===----------------------------------------------------------------------===//
#include "attn/runtime.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" const attn_library attn_library_v1; // fake_kernels.c

namespace {

using i128 = __int128;

enum TensorIndex { Query, Key, Value, Mask, Output, Lse, Sinks, NumTensors };
constexpr int32_t kRoleRank[NumTensors] = {4, 4, 4, 4, 4, 3, 1};
/// At most this many bytes per buffer; a larger tensor gets a pointer no
/// memory backs, and the call is then only checked, never run.
constexpr i128 kMaxBufferBytes = 1 << 20;
/// At most this many multiply-adds per run, to keep each input fast.
constexpr i128 kMaxWork = 1 << 18;

/// Reads the input front to back; past the end every read is 0.
struct Reader {
  const uint8_t *data;
  size_t size, pos = 0;
  uint8_t byte() { return pos < size ? data[pos++] : 0; }
  bool empty() const { return pos >= size; }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= uint64_t(byte()) << (8 * i);
    return v;
  }
  /// A size or stride: mostly small, often a value that stresses overflow
  /// checks, sometimes any 64-bit value.
  int64_t value() {
    static const int64_t special[] = {
        0,
        1,
        -1,
        2,
        -2,
        INT64_MAX,
        INT64_MIN,
        INT64_MAX / 2 + 1,
        INT64_MAX / 4 + 1,
        INT64_MAX / 8 + 1,
        int64_t(1) << 31,
        int64_t(1) << 32,
        (int64_t(1) << 32) + 1,
        int64_t(1) << 61,
        (int64_t(1) << 62) + 1,
        -(int64_t(1) << 62),
        int64_t(SIZE_MAX / 4),
        int64_t(SIZE_MAX / 4) + 1,
        3037000500, // just above sqrt(INT64_MAX)
    };
    uint8_t selector = byte();
    if (selector < 128)
      return int64_t(selector % 16) - 2; // -2 .. 13
    if (selector < 240)
      return special[selector % (sizeof(special) / sizeof(special[0]))];
    return int64_t(u64());
  }
};

/// How a tensor's data pointer is made.
enum class DataMode { Own, Null, Alias, Wild };

struct TensorPlan {
  bool present = true;
  attn_tensor t{};
  DataMode mode = DataMode::Own;
  int aliasOf = 0;         // Alias: the tensor whose buffer holds the data
  int64_t aliasOffset = 0; // Alias: element offset into that buffer
  uintptr_t wild = 0;      // Wild: the pointer itself
};

size_t elementBytes(int32_t dtype) {
  switch (dtype) {
  case ATTN_F32:
    return 4;
  case ATTN_F16:
  case ATTN_BF16:
    return 2;
  case ATTN_BOOL:
    return 1;
  default:
    return 1; // invalid: attn_prepare must refuse it anyway
  }
}

/// The element type as stored, read and written as an int32_t: an invalid
/// value is legal in the C runtime but must not be loaded as a C++ enum.
int32_t dtypeOf(const attn_tensor &t) {
  int32_t v;
  memcpy(&v, &t.dtype, sizeof(v));
  return v;
}
void setDtype(attn_tensor &t, int32_t v) { memcpy(&t.dtype, &v, sizeof(v)); }
static_assert(sizeof(attn_dtype) == sizeof(int32_t), "attn_dtype is 32-bit");

/// The element offsets [low, high] a tensor's descriptor reaches, over the
/// dims of its role; false when it has no element or a negative size.
bool offsetRange(const attn_tensor &t, int32_t rank, i128 &low, i128 &high) {
  low = high = 0;
  for (int32_t d = 0; d < rank; ++d) {
    if (t.shape[d] <= 0)
      return false;
    // |step| < 2^126; clamped to 2^100, still past any address, so that
    // four of them and a byte size add up without overflow.
    constexpr i128 kHuge = i128(1) << 100;
    i128 step = i128(t.strides[d]) * (t.shape[d] - 1);
    step = std::max(-kHuge, std::min(kHuge, step));
    (step < 0 ? low : high) += step;
  }
  return true;
}

/// The bytes [begin, end) of a tensor's elements, in 128 bits.
struct Span {
  bool empty = true;
  i128 begin = 0, end = 0;
};

Span spanOf(const attn_tensor &t, int32_t rank) {
  Span s;
  i128 low, high;
  if (!offsetRange(t, rank, low, high))
    return s;
  i128 elem = elementBytes(dtypeOf(t));
  s.empty = false;
  s.begin = i128(uintptr_t(t.data)) + low * elem;
  s.end = i128(uintptr_t(t.data)) + high * elem + elem;
  return s;
}

bool overlaps(const Span &a, const Span &b) {
  return !a.empty && !b.empty && a.begin < b.end && b.begin < a.end;
}

[[noreturn]] void fail() { __builtin_trap(); }

void expect(bool condition) {
  if (!condition)
    fail();
}

/// What any accepted call must satisfy, computed without check.c.
void checkAccepted(const attn_kernel_desc *k, const attn_tensor *ts[],
                   const attn_kernel_args &args) {
  expect(k != nullptr);
  for (int i : {Query, Key, Value, Output})
    expect(ts[i] != nullptr);
  expect((ts[Mask] != nullptr) == (k->mask_kind != ATTN_MASK_NONE));
  expect((ts[Lse] != nullptr) == (k->has_lse != 0));
  expect((ts[Sinks] != nullptr) == (attn_kernel_has_sinks(k) != 0));
  const int32_t maskType =
      k->mask_kind == ATTN_MASK_BOOL ? ATTN_BOOL : k->dtype;
  const int32_t dtype[NumTensors] = {k->dtype, k->dtype, k->dtype, maskType,
                                     k->dtype, ATTN_F32,  ATTN_F32};
  Span spans[NumTensors];
  for (int i = 0; i < NumTensors; ++i) {
    const attn_tensor *t = ts[i];
    if (!t)
      continue;
    expect(t->rank == kRoleRank[i]);
    expect(dtypeOf(*t) == dtype[i]);
    bool empty = false;
    for (int d = 0; d < kRoleRank[i]; ++d) {
      expect(t->shape[d] >= 0);
      empty |= t->shape[d] == 0;
    }
    expect(empty || t->data != nullptr);
    spans[i] = spanOf(*t, kRoleRank[i]);
    if (!spans[i].empty)
      expect(spans[i].begin >= 0 && spans[i].end <= i128(UINTPTR_MAX) + 1);
  }
  const attn_tensor &q = *ts[Query], &key = *ts[Key], &v = *ts[Value],
                    &o = *ts[Output];
  expect(q.shape[3] == k->head_dim && key.shape[3] == k->head_dim);
  expect(v.shape[3] == k->value_dim && o.shape[3] == k->value_dim);
  expect(key.shape[0] == q.shape[0] && v.shape[0] == q.shape[0]);
  expect(key.shape[1] >= 1 && q.shape[1] % key.shape[1] == 0);
  expect(v.shape[1] == key.shape[1] && v.shape[2] == key.shape[2]);
  for (int d = 0; d < 3; ++d)
    expect(o.shape[d] == q.shape[d]);
  if (const attn_tensor *m = ts[Mask]) {
    for (int d = 0; d < 3; ++d)
      expect(m->shape[d] == q.shape[d] ||
             (m->shape[d] == 1 && k->mask_broadcast[d]));
    expect(m->shape[3] == key.shape[2]);
  }
  if (const attn_tensor *l = ts[Lse])
    for (int d = 0; d < 3; ++d)
      expect(l->shape[d] == q.shape[d]);
  if (const attn_tensor *sinks = ts[Sinks])
    expect(sinks->shape[0] == q.shape[1]);
  // What the kernel writes shares no byte with anything else.
  for (int written : {Output, Lse})
    for (int other = 0; other < NumTensors; ++other)
      if (other != written && ts[written] && ts[other])
        expect(!overlaps(spans[written], spans[other]));
  expect(args.batch == q.shape[0] && args.heads_q == q.shape[1] &&
         args.heads_kv == key.shape[1] && args.seq_q == q.shape[2] &&
         args.seq_k == key.shape[2]);
}

const attn_module *fakeModule() {
  static attn_module *module = [] {
    attn_module *m = nullptr;
    if (attn_module_from_library(&attn_library_v1, &m) != ATTN_OK)
      abort();
    return m;
  }();
  return module;
}

attn_thread_pool *pool() {
  static attn_thread_pool *p = [] {
    attn_thread_pool *p = nullptr;
    if (attn_thread_pool_create(2, &p) != ATTN_OK)
      abort();
    return p;
  }();
  return p;
}

/// A dense descriptor of `shape`, in [B, H, S, D] or, for q/k/v/o when
/// `bshd`, [B, S, H, D] order.
attn_tensor dense(int32_t rank, const int64_t *shape, int32_t dtype,
                  bool bshd) {
  attn_tensor t =
      attn_tensor_contiguous(nullptr, attn_dtype(dtype), rank, shape);
  if (bshd && rank == 4) {
    // Strides of [B, S, H, D] storage for the logical [B, H, S, D] tensor.
    t.strides[3] = 1;
    t.strides[1] = shape[3];
    t.strides[2] = shape[3] * shape[1];
    t.strides[0] = shape[3] * shape[1] * shape[2];
  }
  return t;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Reader in{data, size};
  const attn_module *module = fakeModule();
  const int32_t numKernels = attn_module_num_kernels(module);

  // A valid call to start from.
  uint8_t pick = in.byte();
  const attn_kernel_desc *k =
      pick == 255 ? nullptr : attn_module_kernel(module, pick % numKernels);
  const attn_kernel_desc *shapeOf =
      k ? k : attn_module_kernel(module, 0); // sizes for a NULL kernel
  uint8_t flags = in.byte();
  bool bshd = flags & 1, usePool = flags & 2, flipSeq = flags & 4;
  int64_t batch = in.byte() % 3 + 1, headsKv = in.byte() % 3 + 1,
          group = in.byte() % 3 + 1, seqQ = in.byte() % 7 + 1,
          seqK = in.byte() % 7 + 1;
  int64_t headsQ = headsKv * group;
  if (shapeOf->static_sizes[1] != ATTN_DYNAMIC) {
    headsQ = shapeOf->static_sizes[1];
    headsKv = shapeOf->static_sizes[2];
  }
  const int64_t D = shapeOf->head_dim, Dv = shapeOf->value_dim;
  const int32_t maskType =
      shapeOf->mask_kind == ATTN_MASK_BOOL ? ATTN_BOOL : shapeOf->dtype;
  const int64_t shapes[NumTensors][4] = {
      {batch, headsQ, seqQ, D},   {batch, headsKv, seqK, D},
      {batch, headsKv, seqK, Dv}, {batch, headsQ, seqQ, seqK},
      {batch, headsQ, seqQ, Dv},  {batch, headsQ, seqQ, 0},
      {headsQ, 0, 0, 0}};
  const int32_t dtypes[NumTensors] = {shapeOf->dtype, shapeOf->dtype,
                                      shapeOf->dtype, maskType,
                                      shapeOf->dtype, ATTN_F32,
                                      ATTN_F32};
  TensorPlan plans[NumTensors];
  for (int i = 0; i < NumTensors; ++i) {
    plans[i].t = dense(kRoleRank[i], shapes[i], dtypes[i],
                       bshd && i != Mask && i != Lse && i != Sinks);
    if (flipSeq && kRoleRank[i] == 4) // walk the sequence backwards
      plans[i].t.strides[2] = -plans[i].t.strides[2];
  }
  plans[Mask].present = shapeOf->mask_kind != ATTN_MASK_NONE;
  plans[Lse].present = shapeOf->has_lse != 0;
  plans[Sinks].present = attn_kernel_has_sinks(shapeOf) != 0;

  // The edits.
  while (!in.empty()) {
    uint8_t op = in.byte();
    TensorPlan &p = plans[in.byte() % NumTensors];
    int d = in.byte() % 4;
    switch (op % 8) {
    case 0:
    case 1:
      p.t.shape[d] = in.value();
      break;
    case 2:
    case 3:
      p.t.strides[d] = in.value();
      break;
    case 4: {
      uint8_t v = in.byte();
      setDtype(p.t, v < 200 ? int32_t(v % 6) - 1 : int32_t(in.u64()));
      break;
    }
    case 5:
      p.t.rank = int32_t(int8_t(in.byte()) % 6);
      break;
    case 6: {
      uint8_t mode = in.byte() % 4;
      if (mode == 0) {
        p.mode = DataMode::Null;
      } else if (mode == 1) {
        p.mode = DataMode::Alias;
        p.aliasOf = in.byte() % NumTensors;
        p.aliasOffset = int64_t(int8_t(in.byte()));
      } else if (mode == 2) {
        static const uintptr_t wild[] = {16, 4096, UINTPTR_MAX - 15,
                                         UINTPTR_MAX / 2, ~uintptr_t(4095)};
        p.mode = DataMode::Wild;
        p.wild = wild[in.byte() % 5];
      } else {
        p.mode = DataMode::Own;
      }
      break;
    }
    case 7:
      p.present = !p.present;
      break;
    }
  }

  // Buffers: exactly the extent each descriptor names, so that ASan sees any
  // access past it. Descriptors too large for a buffer get a pointer that no
  // memory backs (the call is then checked but not run).
  std::vector<uint8_t *> buffers(NumTensors, nullptr);
  i128 bufferBytes[NumTensors] = {};
  bool runnable = true;
  for (int i = 0; i < NumTensors; ++i) {
    TensorPlan &p = plans[i];
    if (p.mode != DataMode::Own)
      continue;
    i128 low, high;
    if (!offsetRange(p.t, kRoleRank[i], low, high)) {
      p.t.data = nullptr; // no element: no memory needed
      continue;
    }
    i128 elem = elementBytes(dtypeOf(p.t));
    i128 bytes = (high - low + 1) * elem;
    if (bytes > kMaxBufferBytes) {
      p.t.data = reinterpret_cast<void *>(uintptr_t(1) << 44);
      runnable = false;
      continue;
    }
    buffers[i] = static_cast<uint8_t *>(malloc(size_t(bytes)));
    memset(buffers[i], 0x3e, size_t(bytes)); // floats of 0.186, masks true
    bufferBytes[i] = bytes;
    // The lowest element at the start of the buffer (low <= 0).
    p.t.data = buffers[i] + size_t(-low * elem);
  }
  for (int i = 0; i < NumTensors; ++i) {
    TensorPlan &p = plans[i];
    if (p.mode == DataMode::Null) {
      p.t.data = nullptr;
    } else if (p.mode == DataMode::Wild) {
      p.t.data = reinterpret_cast<void *>(p.wild);
      runnable = false;
    } else if (p.mode == DataMode::Alias) {
      uint8_t *base = buffers[p.aliasOf];
      i128 offset = i128(p.aliasOffset) * elementBytes(dtypeOf(p.t));
      if (!base || offset < 0 || offset >= bufferBytes[p.aliasOf]) {
        p.t.data = reinterpret_cast<void *>(uintptr_t(1) << 44);
        runnable = false;
        continue;
      }
      p.t.data = base + size_t(offset);
      // Runs only when the whole tensor lies inside the buffer it borrows.
      Span s = spanOf(p.t, kRoleRank[i]);
      if (!s.empty && (s.begin < i128(uintptr_t(base)) ||
                       s.end > i128(uintptr_t(base)) + bufferBytes[p.aliasOf]))
        runnable = false;
    }
  }

  const attn_tensor *ts[NumTensors];
  for (int i = 0; i < NumTensors; ++i)
    ts[i] = plans[i].present ? &plans[i].t : nullptr;

  // Through the options (what every entry point of a forward call comes
  // to), sinks and all.
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.sinks = ts[Sinks];
  attn_kernel_args args;
  attn_status status =
      attn_prepare_with(k, ts[Query], ts[Key], ts[Value], ts[Mask], ts[Output],
                        ts[Lse], &options, &args);
  expect(attn_last_error() != nullptr);
  if (status == ATTN_OK) {
    checkAccepted(k, ts, args);
    i128 work = i128(args.batch) * args.heads_q * args.seq_q *
                (args.seq_k + 1) * (k->head_dim + k->value_dim + 1);
    if (runnable && work <= kMaxWork) {
      attn_status ran = attn_run_with(k, ts[Query], ts[Key], ts[Value],
                                      ts[Mask], ts[Output], ts[Lse], &options,
                                      usePool ? pool() : nullptr);
      expect(ran == ATTN_OK || (ran == ATTN_ERROR_UNSUPPORTED_CPU &&
                                attn_kernel_check_cpu(k) != ATTN_OK));
    }
  } else {
    expect(attn_last_error()[0] != '\0'); // every refusal says why
  }
  for (uint8_t *b : buffers)
    free(b);
  return 0;
}
