//===- Harness.cpp - Run a compiled kernel against the reference ----------===//
#include "lib/Harness/Harness.h"

#include "lib/Support/Half.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

using namespace attn;

namespace {

size_t elementSize(attn_dtype type) {
  switch (type) {
  case ATTN_BOOL:
    return 1;
  case ATTN_F16:
  case ATTN_BF16:
    return 2;
  case ATTN_F32:
  case ATTN_I32:
    return 4;
  case ATTN_I64:
    return 8;
  }
  return 4;
}

attn_dtype dtypeOf(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return ATTN_F32;
  case ElementType::F16:
    return ATTN_F16;
  case ElementType::BF16:
    return ATTN_BF16;
  }
  return ATTN_F32;
}

/// Stores `value` rounded to `type` at element `index`; returns the stored
/// value read back (what the kernel will see).
double store(AlignedVector<uint8_t> &bytes, attn_dtype type, int64_t index,
             double value) {
  switch (type) {
  case ATTN_F32: {
    float f = static_cast<float>(value);
    std::memcpy(&bytes[index * 4], &f, 4);
    return f;
  }
  case ATTN_F16: {
    uint16_t h = floatToHalf(static_cast<float>(value));
    std::memcpy(&bytes[index * 2], &h, 2);
    return halfToFloat(h);
  }
  case ATTN_BF16: {
    uint16_t h = floatToBF16(static_cast<float>(value));
    std::memcpy(&bytes[index * 2], &h, 2);
    return bf16ToFloat(h);
  }
  case ATTN_BOOL:
    bytes[index] = value != 0;
    return value != 0;
  case ATTN_I32: {
    int32_t i = static_cast<int32_t>(value);
    std::memcpy(&bytes[index * 4], &i, 4);
    return i;
  }
  case ATTN_I64: {
    int64_t i = static_cast<int64_t>(value);
    std::memcpy(&bytes[index * 8], &i, 8);
    return static_cast<double>(i);
  }
  }
  return 0;
}

double load(const AlignedVector<uint8_t> &bytes, attn_dtype type,
            int64_t index) {
  switch (type) {
  case ATTN_F32: {
    float f;
    std::memcpy(&f, &bytes[index * 4], 4);
    return f;
  }
  case ATTN_F16: {
    uint16_t h;
    std::memcpy(&h, &bytes[index * 2], 2);
    return halfToFloat(h);
  }
  case ATTN_BF16: {
    uint16_t h;
    std::memcpy(&h, &bytes[index * 2], 2);
    return bf16ToFloat(h);
  }
  case ATTN_BOOL:
    return bytes[index] != 0;
  case ATTN_I32: {
    int32_t i;
    std::memcpy(&i, &bytes[index * 4], 4);
    return i;
  }
  case ATTN_I64: {
    int64_t i;
    std::memcpy(&i, &bytes[index * 8], 8);
    return static_cast<double>(i);
  }
  }
  return 0;
}

/// Allocates a tensor of logical shape `shape`, stored either row-major or
/// with dims 1 and 2 swapped in memory ([B, S, H, D] for [B, H, S, D]).
void allocate(HostTensor &t, attn_dtype type, const int64_t shape[4],
              bool swapHeadsAndSeq) {
  int64_t count = shape[0] * shape[1] * shape[2] * shape[3];
  t.bytes.assign(std::max<int64_t>(count, 1) * elementSize(type), 0);
  t.values.assign(count, 0.0);
  t.view = attn_tensor{};
  t.view.data = t.bytes.data();
  t.view.dtype = type;
  t.view.rank = 4;
  for (int d = 0; d < 4; ++d)
    t.view.shape[d] = shape[d];
  if (swapHeadsAndSeq) {
    t.view.strides[3] = 1;
    t.view.strides[1] = shape[3];
    t.view.strides[2] = shape[1] * shape[3];
    t.view.strides[0] = shape[2] * shape[1] * shape[3];
  } else {
    t.view.strides[3] = 1;
    t.view.strides[2] = shape[3];
    t.view.strides[1] = shape[2] * shape[3];
    t.view.strides[0] = shape[1] * shape[2] * shape[3];
  }
}

template <typename Fn> void forEach(const attn_tensor &t, Fn fn) {
  int64_t linear = 0;
  for (int64_t a = 0; a < t.shape[0]; ++a)
    for (int64_t b = 0; b < t.shape[1]; ++b)
      for (int64_t c = 0; c < t.shape[2]; ++c)
        for (int64_t d = 0; d < t.shape[3]; ++d, ++linear)
          fn(linear, a * t.strides[0] + b * t.strides[1] + c * t.strides[2] +
                         d * t.strides[3]);
}

void fill(HostTensor &t, std::mt19937_64 &rng, double scale) {
  std::normal_distribution<double> normal(0.0, 1.0);
  forEach(t.view, [&](int64_t linear, int64_t offset) {
    t.values[linear] =
        store(t.bytes, t.view.dtype, offset, scale * normal(rng));
  });
}

} // namespace

void Problem::maskShape(int64_t shape[4]) const {
  shape[0] = spec.maskBroadcast[0] ? 1 : batch;
  shape[1] = spec.maskBroadcast[1] ? 1 : headsQ;
  shape[2] = spec.maskBroadcast[2] ? 1 : seqQ;
  shape[3] = seqK;
}

std::string Problem::describe() const {
  std::ostringstream os;
  os << printKernelSpec(spec) << " B=" << batch;
  if (!spec.additive) // no heads
    os << " Hq=" << headsQ << " Hkv=" << headsKv;
  os << " Sq=" << seqQ << " Sk=" << seqK << (bshd ? " layout=bshd" : "");
  return os.str();
}

std::optional<uint64_t> attn::hostBytesNeeded(const Problem &p) {
  uint64_t elementBytes = p.spec.elementType == ElementType::F32 ? 4 : 2;
  uint64_t total = 0;
  // Adds `count` elements of `bytes` each, the product of `dims`.
  auto add = [&](std::initializer_list<int64_t> dims, uint64_t bytes) {
    uint64_t count = bytes;
    for (int64_t dim : dims)
      if (dim < 0 || __builtin_mul_overflow(count, dim, &count))
        return false;
    return !__builtin_add_overflow(total, count, &total);
  };
  const KernelSpec &spec = p.spec;
  if (spec.additive) {
    // Q, keys, values, the network, O: elements plus values; O and the
    // weights once more for the reference; the mask.
    bool fits = add({p.batch, p.seqQ, spec.queryDim}, elementBytes + 8) &&
                add({p.batch, p.seqK, spec.headDim + spec.valueDim},
                    elementBytes + 8) &&
                add({spec.attnDim, spec.queryDim + spec.headDim + 1},
                    elementBytes + 8) &&
                add({p.batch, p.seqQ, spec.valueDim}, elementBytes + 16) &&
                add({p.batch, p.seqQ, p.seqK},
                    (spec.additiveWeights ? 4 : 0) + 8 + 1 + 8);
    return fits ? std::optional<uint64_t>(total) : std::nullopt;
  }
  int64_t mask[4];
  p.maskShape(mask);
  uint64_t maskBytes = p.spec.mask == MaskKind::Bool ? 1 : elementBytes;
  // Q, K, V, O: elements plus values; O once more for the reference.
  bool fits =
      add({p.batch, p.headsQ, p.seqQ, p.spec.headDim}, elementBytes + 8) &&
      add({p.batch, p.headsKv, p.seqK, p.spec.headDim}, elementBytes + 8) &&
      add({p.batch, p.headsKv, p.seqK, p.spec.valueDim}, elementBytes + 8) &&
      add({p.batch, p.headsQ, p.seqQ, p.spec.valueDim}, elementBytes + 16) &&
      add({p.batch, p.headsQ, p.seqQ}, 4 + 8) &&
      (p.spec.mask == MaskKind::None ||
       add({mask[0], mask[1], mask[2], mask[3]}, maskBytes + 8)) &&
      // The backward's dO, dLSE, dQ, dK, dV and their reference values.
      (!p.spec.backward ||
       (add({p.batch, p.headsQ, p.seqQ, p.spec.valueDim}, elementBytes + 8) &&
        add({p.batch, p.headsQ, p.seqQ}, 8) &&
        add({p.batch, p.headsQ, p.seqQ, p.spec.headDim}, elementBytes + 16) &&
        add({p.batch, p.headsKv, p.seqK, p.spec.headDim}, elementBytes + 16) &&
        add({p.batch, p.headsKv, p.seqK, p.spec.valueDim}, elementBytes + 16))) &&
      // dM (f32), its values and the reference's.
      (!p.spec.gradMask || add({p.batch, p.headsQ, p.seqQ, p.seqK}, 4 + 16)) &&
      // The sinks, their values.
      (!p.hasSinks() || add({p.headsQ}, 4 + 8)) &&
      // The weights W (f32), their values and the reference's.
      (!p.spec.weights || add({p.batch, p.headsQ, p.seqQ, p.seqK}, 4 + 16));
  return fits ? std::optional<uint64_t>(total) : std::nullopt;
}

namespace {
/// A dense f32 tensor of shape `dims` over `values` (resized to fit, at
/// least one element; new elements 0).
attn_tensor denseF32(std::vector<float> &values,
                     std::initializer_list<int64_t> dims) {
  int64_t count = 1;
  for (int64_t dim : dims)
    count *= dim;
  values.resize(static_cast<size_t>(std::max<int64_t>(count, 1)));
  attn_tensor view{};
  view.data = values.data();
  view.dtype = ATTN_F32;
  view.rank = static_cast<int32_t>(dims.size());
  int64_t stride = 1;
  for (int d = view.rank - 1; d >= 0; --d) {
    view.shape[d] = dims.begin()[d];
    view.strides[d] = stride;
    stride *= view.shape[d];
  }
  return view;
}

/// "<name>: max rel err R (max abs A, N NaN and M inf mismatches)".
void describeErrors(std::ostream &os, const char *name,
                    const ErrorStats &stats) {
  os << name << ": max rel err " << stats.relative << " (max abs "
     << stats.maxAbs << ", " << stats.nanMismatches << " NaN and "
     << stats.infMismatches << " inf mismatches)";
}
} // namespace

void attn::makeProblemData(const Problem &p, ProblemData &data) {
  std::mt19937_64 rng(p.seed);
  attn_dtype type = dtypeOf(p.spec.elementType);
  const int64_t q[4] = {p.batch, p.headsQ, p.seqQ, p.spec.headDim};
  const int64_t k[4] = {p.batch, p.headsKv, p.seqK, p.spec.headDim};
  const int64_t v[4] = {p.batch, p.headsKv, p.seqK, p.spec.valueDim};
  const int64_t o[4] = {p.batch, p.headsQ, p.seqQ, p.spec.valueDim};
  allocate(data.query, type, q, p.bshd);
  allocate(data.key, type, k, p.bshd);
  allocate(data.value, type, v, p.bshd);
  allocate(data.output, type, o, p.bshd);
  fill(data.query, rng, p.inputScale);
  fill(data.key, rng, p.inputScale);
  fill(data.value, rng, 1.0);

  data.hasMask = p.spec.mask != MaskKind::None;
  if (data.hasMask) {
    int64_t m[4];
    p.maskShape(m);
    bool keep = p.spec.mask == MaskKind::Bool;
    allocate(data.mask, keep ? ATTN_BOOL : type, m, false);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    forEach(data.mask.view, [&](int64_t linear, int64_t offset) {
      bool drop = uniform(rng) < p.maskDropRate;
      double value = keep ? (drop ? 0.0 : 1.0)
                          : (drop ? -std::numeric_limits<double>::infinity()
                                  : uniform(rng) - 0.5);
      data.mask.values[linear] =
          store(data.mask.bytes, data.mask.view.dtype, offset, value);
    });
  }
  data.sinks.clear();
  data.sinksView = attn_tensor{};
  if (p.hasSinks()) {
    std::uniform_real_distribution<double> moderate(-1.0, 4.0);
    for (int64_t h = 0; h < p.headsQ; ++h)
      data.sinks.push_back(
          h == 1   ? -std::numeric_limits<float>::infinity()
          : h == 2 ? 30.0f
                   : static_cast<float>(moderate(rng)));
    data.sinks.resize(std::max<int64_t>(p.headsQ, 1));
    data.sinksView.data = data.sinks.data();
    data.sinksView.dtype = ATTN_F32;
    data.sinksView.rank = 1;
    data.sinksView.shape[0] = p.headsQ;
    data.sinksView.strides[0] = 1;
  }
  data.modifiers = p.modifiers;
  data.dropoutP = p.spec.dropout ? p.dropoutP : 0.0f;
  data.dropoutSeed = p.spec.dropout ? p.dropoutSeed : 0;
  data.captureValues.clear();
  data.captureBytes.clear();
  data.captureViews.clear();
  if (p.modifiers && p.modifiers->captures) {
    data.captureValues = p.modifiers->captures(p);
    for (CaptureValues &capture : data.captureValues) {
      size_t width = elementSize(capture.type);
      AlignedVector<uint8_t> bytes(std::max<size_t>(capture.values.size(), 1) *
                                   width);
      for (size_t e = 0; e < capture.values.size(); ++e)
        capture.values[e] = store(bytes, capture.type,
                                  static_cast<int64_t>(e), capture.values[e]);
      data.captureBytes.push_back(std::move(bytes));
    }
    for (size_t c = 0; c < data.captureValues.size(); ++c) {
      const CaptureValues &capture = data.captureValues[c];
      attn_tensor view{};
      view.data = data.captureBytes[c].data();
      view.dtype = capture.type;
      view.rank = static_cast<int32_t>(capture.shape.size());
      int64_t stride = 1;
      for (int d = view.rank - 1; d >= 0; --d) {
        view.shape[d] = capture.shape[d];
        view.strides[d] = stride;
        stride *= capture.shape[d];
      }
      data.captureViews.push_back(view);
    }
  }
  data.lse.clear();
  data.lseView = attn_tensor{};
  if (p.spec.lse)
    data.lseView = denseF32(data.lse, {p.batch, p.headsQ, p.seqQ});
  poisonOutputs(data);
}

namespace {
/// NaN over every element of `t` (its bytes; the values stay).
void poison(HostTensor &t) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  forEach(t.view, [&](int64_t, int64_t offset) {
    store(t.bytes, t.view.dtype, offset, nan);
  });
}
} // namespace

void attn::poisonTensor(HostTensor &tensor) { poison(tensor); }

void attn::poisonOutputs(ProblemData &data) {
  poison(data.output);
  for (float &value : data.lse)
    value = std::numeric_limits<float>::quiet_NaN();
}

void attn::setValues(HostTensor &t, const std::vector<double> &values) {
  forEach(t.view, [&](int64_t linear, int64_t offset) {
    t.values[linear] = store(t.bytes, t.view.dtype, offset, values[linear]);
  });
}

std::vector<double> attn::tensorValues(const HostTensor &tensor) {
  std::vector<double> values(tensor.values.size());
  forEach(tensor.view, [&](int64_t linear, int64_t offset) {
    values[linear] = load(tensor.bytes, tensor.view.dtype, offset);
  });
  return values;
}

std::vector<double> attn::outputValues(const ProblemData &data) {
  return tensorValues(data.output);
}

bool attn::cudaTarget(std::string &arch, std::string &description,
                      std::string &error) {
  char name[128] = "";
  int32_t major = 0, minor = 0;
  if (attn_cuda_device(name, sizeof(name), &major, &minor) != ATTN_OK) {
    error = attn_last_error();
    return false;
  }
  arch = "sm_" + std::to_string(major) + std::to_string(minor);
  description = std::string(name) + ", " + arch;
  if (major < 8) {
    error = description + ": the GPU kernels need sm_80 or newer";
    return false;
  }
  return true;
}

attn::DeviceBuffer::~DeviceBuffer() { attn_cuda_free(device); }

attn_status attn::DeviceBuffer::upload(const void *host, size_t size,
                                       const attn_tensor &hostView) {
  bytes = size;
  view = hostView;
  attn_status status = attn_cuda_malloc(bytes, &device);
  if (status == ATTN_OK)
    status = attn_cuda_copy(device, host, bytes, ATTN_COPY_TO_DEVICE);
  // The view's element [0,0,0,0] sits where it sits in the host buffer.
  view.data = static_cast<uint8_t *>(device) +
              (static_cast<const uint8_t *>(hostView.data) -
               static_cast<const uint8_t *>(host));
  return status;
}

attn_status attn::DeviceBuffer::download(void *host) const {
  return attn_cuda_copy(host, device, bytes, ATTN_COPY_TO_HOST);
}

attn_status attn::DeviceProblem::upload(const ProblemData &data) {
  hasMask = data.hasMask;
  hasLse = !data.lse.empty();
  attn_status status = query.upload(data.query);
  if (status == ATTN_OK)
    status = key.upload(data.key);
  if (status == ATTN_OK)
    status = value.upload(data.value);
  if (status == ATTN_OK && hasMask)
    status = mask.upload(data.mask);
  if (status == ATTN_OK)
    status = output.upload(data.output);
  if (status == ATTN_OK && hasLse)
    status = lse.upload(data.lse, data.lseView);
  hasSinks = data.sinksView.data != nullptr;
  dropoutP = data.dropoutP;
  dropoutSeed = data.dropoutSeed;
  if (status == ATTN_OK && hasSinks)
    status = sinks.upload(data.sinks, data.sinksView);
  captures = std::vector<DeviceBuffer>(data.captureViews.size());
  captureViews.clear();
  for (size_t n = 0; n < captures.size() && status == ATTN_OK; ++n) {
    status =
        captures[n].upload(data.captureBytes[n].data(),
                           data.captureBytes[n].size(), data.captureViews[n]);
    captureViews.push_back(captures[n].view);
  }
  return status;
}

namespace {
/// A call's options that every kind of call takes: the captured tensors
/// and dropout's probability and seed.
attn_run_options callOptions(const std::vector<attn_tensor> &captures,
                             float dropoutP, uint64_t dropoutSeed) {
  attn_run_options options{};
  options.struct_size = sizeof(options);
  options.captures = captures.data();
  options.num_captures = static_cast<int32_t>(captures.size());
  options.dropout_p = dropoutP;
  options.dropout_seed = dropoutSeed;
  return options;
}
} // namespace

attn_status attn::DeviceProblem::run(const attn_kernel_desc *kernel) {
  attn_run_options options = callOptions(captureViews, dropoutP, dropoutSeed);
  options.sinks = hasSinks ? &sinks.view : nullptr;
  return attn_run_with(kernel, &query.view, &key.view, &value.view,
                       hasMask ? &mask.view : nullptr, &output.view,
                       hasLse ? &lse.view : nullptr, &options, nullptr);
}

attn_status attn::DeviceProblem::download(ProblemData &data) {
  attn_status status = output.download(data.output.bytes.data());
  if (status == ATTN_OK && hasLse)
    status = lse.download(data.lse.data());
  return status;
}

attn_status attn::runProblem(const attn_kernel_desc *kernel, ProblemData &data,
                             attn_thread_pool *pool, int64_t keySplits) {
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    DeviceProblem device;
    attn_status status = device.upload(data);
    if (status == ATTN_OK)
      status = device.run(kernel);
    if (status == ATTN_OK)
      status = device.download(data);
    return status;
  }
  attn_run_options options =
      callOptions(data.captureViews, data.dropoutP, data.dropoutSeed);
  options.sinks = data.sinksView.data ? &data.sinksView : nullptr;
  options.key_splits = keySplits;
  return attn_run_with(
      kernel, &data.query.view, &data.key.view, &data.value.view,
      data.hasMask ? &data.mask.view : nullptr, &data.output.view,
      data.lse.empty() && data.lseView.data == nullptr ? nullptr
                                                       : &data.lseView,
      &options, pool);
}

KernelSpec attn::specOfKernel(const attn_kernel_desc *kernel) {
  KernelSpec spec;
  spec.name = kernel->name;
  spec.elementType = kernel->dtype == ATTN_BF16  ? ElementType::BF16
                     : kernel->dtype == ATTN_F16 ? ElementType::F16
                                                 : ElementType::F32;
  spec.headDim = kernel->head_dim;
  spec.valueDim = kernel->value_dim;
  spec.mask = kernel->mask_kind == ATTN_MASK_BOOL   ? MaskKind::Bool
              : kernel->mask_kind == ATTN_MASK_BIAS ? MaskKind::Bias
                                                    : MaskKind::None;
  for (int i = 0; i < 3; ++i)
    spec.maskBroadcast[i] = kernel->mask_broadcast[i] != 0;
  spec.causal = kernel->causal != 0;
  spec.alignment = kernel->alignment == ATTN_ALIGN_BOTTOM_RIGHT
                       ? Alignment::BottomRight
                       : Alignment::TopLeft;
  if (kernel->window_left != ATTN_UNBOUNDED)
    spec.windowLeft = kernel->window_left;
  if (kernel->window_right != ATTN_UNBOUNDED)
    spec.windowRight = kernel->window_right;
  spec.scale = kernel->scale;
  if (kernel->softcap != 0)
    spec.softcap = kernel->softcap;
  spec.sinks = attn_kernel_has_sinks(kernel) != 0;
  // A backward kernel reads the forward's LSE whatever its spec; the key
  // `lse` gave it dLSE.
  spec.backward = attn_kernel_kind_of(kernel) == ATTN_KERNEL_BACKWARD;
  spec.lse = spec.backward ? kernel->has_grad_lse != 0 : kernel->has_lse != 0;
  spec.gradMask = spec.backward && attn_kernel_has_grad_mask(kernel);
  spec.dropout = attn_kernel_has_dropout(kernel) != 0;
  spec.weights = attn_kernel_kind_of(kernel) == ATTN_KERNEL_WEIGHTS;
  for (int i = 0; i < 5; ++i)
    spec.staticSizes[i] = kernel->static_sizes[i];
  return spec;
}

namespace {
RefTensor denseView(const HostTensor &t) {
  return RefTensor::dense(t.values.data(), t.view.shape[0], t.view.shape[1],
                          t.view.shape[2], t.view.shape[3]);
}

ReferenceInputs referenceInputs(const ProblemData &data) {
  ReferenceInputs inputs;
  inputs.query = denseView(data.query);
  inputs.key = denseView(data.key);
  inputs.value = denseView(data.value);
  if (data.hasMask)
    inputs.mask = denseView(data.mask);
  inputs.dropoutP = data.dropoutP;
  inputs.dropoutSeed = data.dropoutSeed;
  inputs.sinks.assign(data.sinks.begin(), data.sinks.end());
  inputs.sinks.resize(data.sinksView.data ? data.sinksView.shape[0] : 0);
  if (const ModifierCase *m = data.modifiers.get()) {
    const std::vector<CaptureValues> *values = &data.captureValues;
    if (m->scoreMod)
      inputs.scoreMod = [m, values](double s, int64_t b, int64_t h, int64_t i,
                                    int64_t j) {
        return m->scoreMod(*values, s, b, h, i, j);
      };
    if (m->maskMod)
      inputs.maskMod = [m, values](int64_t b, int64_t h, int64_t i,
                                   int64_t j) {
        return m->maskMod(*values, b, h, i, j);
      };
  }
  return inputs;
}
} // namespace

CheckReport attn::checkAgainstReference(const Problem &p,
                                        const ProblemData &data) {
  CheckReport report;
  report.tolerance = tolerance(p.spec.elementType);
  ReferenceOutputs ref;
  std::string error;
  if (!computeReference(p.spec, referenceInputs(data), ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  relativeError(outputValues(data), ref.output, &report.output);
  bool ok = report.output.within(report.tolerance);
  if (p.spec.lse) {
    std::vector<double> lse(data.lse.begin(),
                            data.lse.begin() + ref.lse.size());
    relativeError(lse, ref.lse, &report.lse);
    ok = ok && report.lse.within(report.tolerance);
  }
  report.passed = ok;
  std::ostringstream os;
  describeErrors(os, "output", report.output);
  if (p.spec.lse)
    os << "; lse: max rel err " << report.lse.relative << " ("
       << report.lse.nanMismatches << " NaN, " << report.lse.infMismatches
       << " inf mismatches)";
  os << "; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}

//===----------------------------------------------------------------------===//
// The backward
//===----------------------------------------------------------------------===//

bool attn::makeBackwardData(const Problem &p, ProblemData &data,
                            BackwardData &backward, std::string &error) {
  ReferenceOutputs forward;
  if (!computeReference(p.spec, referenceInputs(data), forward, error))
    return false;
  setValues(data.output, forward.output);
  backward.lseView = denseF32(backward.lse, {p.batch, p.headsQ, p.seqQ});
  for (size_t i = 0; i < forward.lse.size(); ++i)
    backward.lse[i] = static_cast<float>(forward.lse[i]);

  std::mt19937_64 rng(p.seed ^ 0x9e3779b97f4a7c15ull);
  attn_dtype type = dtypeOf(p.spec.elementType);
  const int64_t q[4] = {p.batch, p.headsQ, p.seqQ, p.spec.headDim};
  const int64_t k[4] = {p.batch, p.headsKv, p.seqK, p.spec.headDim};
  const int64_t v[4] = {p.batch, p.headsKv, p.seqK, p.spec.valueDim};
  const int64_t o[4] = {p.batch, p.headsQ, p.seqQ, p.spec.valueDim};
  allocate(backward.gradOutput, type, o, p.bshd);
  allocate(backward.gradQuery, type, q, p.bshd);
  allocate(backward.gradKey, type, k, p.bshd);
  allocate(backward.gradValue, type, v, p.bshd);
  fill(backward.gradOutput, rng, 1.0);
  backward.hasGradLse = p.spec.lse;
  backward.gradLseView = attn_tensor{};
  if (backward.hasGradLse) {
    backward.gradLseView =
        denseF32(backward.gradLse, {p.batch, p.headsQ, p.seqQ});
    std::normal_distribution<double> normal(0.0, 1.0);
    for (float &value : backward.gradLse)
      value = static_cast<float>(normal(rng));
  }
  backward.hasGradMask = p.spec.gradMask;
  backward.gradMask.clear();
  backward.gradMaskView = attn_tensor{};
  if (backward.hasGradMask) {
    const int64_t count = p.batch * p.headsQ * p.seqQ * p.seqK;
    backward.gradMask.resize(static_cast<size_t>(std::max<int64_t>(count, 1)));
    attn_tensor &view = backward.gradMaskView;
    view.data = backward.gradMask.data();
    view.dtype = ATTN_F32;
    view.rank = 4;
    const int64_t shape[4] = {p.batch, p.headsQ, p.seqQ, p.seqK};
    // [B, S, H, D] problems store dM transposed ([B, Hq, Sk, Sq] in
    // memory), as the weights: the kernel's element-wise path.
    const int64_t order[4] = {0, 1, p.bshd ? 3 : 2, p.bshd ? 2 : 3};
    int64_t stride = 1;
    for (int d = 3; d >= 0; --d) {
      view.shape[d] = shape[d];
      view.strides[order[d]] = stride;
      stride *= std::max<int64_t>(shape[order[d]], 1);
    }
  }
  poisonGradients(backward);
  return true;
}

void attn::poisonGradients(BackwardData &backward) {
  double nan = std::numeric_limits<double>::quiet_NaN();
  for (HostTensor *t :
       {&backward.gradQuery, &backward.gradKey, &backward.gradValue})
    forEach(t->view, [&](int64_t, int64_t offset) {
      store(t->bytes, t->view.dtype, offset, nan);
    });
  std::fill(backward.gradMask.begin(), backward.gradMask.end(),
            std::numeric_limits<float>::quiet_NaN());
}

attn_status attn::DeviceBackwardProblem::upload(const ProblemData &data,
                                                const BackwardData &backward) {
  hasGradLse = backward.hasGradLse;
  hasGradMask = backward.hasGradMask;
  attn_status status = DeviceProblem::upload(data);
  if (status == ATTN_OK)
    status = forwardLse.upload(backward.lse, backward.lseView);
  if (status == ATTN_OK)
    status = gradOutput.upload(backward.gradOutput);
  if (status == ATTN_OK && hasGradLse)
    status = gradLse.upload(backward.gradLse, backward.gradLseView);
  if (status == ATTN_OK)
    status = gradQuery.upload(backward.gradQuery);
  if (status == ATTN_OK)
    status = gradKey.upload(backward.gradKey);
  if (status == ATTN_OK)
    status = gradValue.upload(backward.gradValue);
  if (status == ATTN_OK && hasGradMask)
    status = gradMask.upload(backward.gradMask, backward.gradMaskView);
  return status;
}

attn_status attn::DeviceBackwardProblem::run(const attn_kernel_desc *kernel) {
  attn_run_options options = callOptions(captureViews, dropoutP, dropoutSeed);
  options.grad_mask = hasGradMask ? &gradMask.view : nullptr;
  return attn_run_backward_with(
      kernel, &query.view, &key.view, &value.view,
      hasMask ? &mask.view : nullptr, &output.view, &forwardLse.view,
      &gradOutput.view, hasGradLse ? &gradLse.view : nullptr, &gradQuery.view,
      &gradKey.view, &gradValue.view, &options, nullptr);
}

attn_status attn::DeviceBackwardProblem::download(BackwardData &backward) {
  attn_status status = gradQuery.download(backward.gradQuery.bytes.data());
  if (status == ATTN_OK)
    status = gradKey.download(backward.gradKey.bytes.data());
  if (status == ATTN_OK)
    status = gradValue.download(backward.gradValue.bytes.data());
  if (status == ATTN_OK && hasGradMask)
    status = gradMask.download(backward.gradMask.data());
  return status;
}

attn_status attn::runBackwardProblem(const attn_kernel_desc *kernel,
                                     ProblemData &data, BackwardData &backward,
                                     attn_thread_pool *pool) {
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    DeviceBackwardProblem device;
    attn_status status = device.upload(data, backward);
    if (status == ATTN_OK)
      status = device.run(kernel);
    if (status == ATTN_OK)
      status = device.download(backward);
    return status;
  }
  attn_run_options options =
      callOptions(data.captureViews, data.dropoutP, data.dropoutSeed);
  options.grad_mask = backward.hasGradMask ? &backward.gradMaskView : nullptr;
  return attn_run_backward_with(
      kernel, &data.query.view, &data.key.view, &data.value.view,
      data.hasMask ? &data.mask.view : nullptr, &data.output.view,
      &backward.lseView, &backward.gradOutput.view,
      backward.hasGradLse ? &backward.gradLseView : nullptr,
      &backward.gradQuery.view, &backward.gradKey.view,
      &backward.gradValue.view, &options, pool);
}

namespace {
/// dM in the logical [B, Hq, Sq, Sk] order (empty without one).
std::vector<double> gradMaskValues(const BackwardData &backward) {
  std::vector<double> values;
  if (!backward.hasGradMask)
    return values;
  const attn_tensor &view = backward.gradMaskView;
  forEach(view, [&](int64_t, int64_t offset) {
    values.push_back(backward.gradMask[static_cast<size_t>(offset)]);
  });
  return values;
}
} // namespace

std::vector<double> attn::gradientValues(const BackwardData &backward) {
  std::vector<double> values = tensorValues(backward.gradQuery);
  for (const HostTensor *t : {&backward.gradKey, &backward.gradValue}) {
    std::vector<double> more = tensorValues(*t);
    values.insert(values.end(), more.begin(), more.end());
  }
  std::vector<double> mask = gradMaskValues(backward);
  values.insert(values.end(), mask.begin(), mask.end());
  return values;
}

BackwardReport attn::checkBackwardAgainstReference(
    const Problem &p, const ProblemData &data, const BackwardData &backward) {
  BackwardReport report;
  report.tolerance = gradientTolerance(p.spec.elementType);
  std::vector<double> gradLse(backward.gradLse.begin(),
                              backward.gradLse.begin() +
                                  (backward.hasGradLse
                                       ? p.batch * p.headsQ * p.seqQ
                                       : 0));
  // The reference reads dO as the kernel does: its rounded values.
  ReferenceGradients ref;
  std::string error;
  if (!computeReferenceBackward(
          p.spec, referenceInputs(data), denseView(data.output),
          denseView(backward.gradOutput),
          backward.hasGradLse ? &gradLse : nullptr, ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  relativeError(tensorValues(backward.gradQuery), ref.query, &report.query);
  relativeError(tensorValues(backward.gradKey), ref.key, &report.key);
  relativeError(tensorValues(backward.gradValue), ref.value, &report.value);
  report.passed = report.query.within(report.tolerance) &&
                  report.key.within(report.tolerance) &&
                  report.value.within(report.tolerance);
  if (backward.hasGradMask) {
    relativeError(gradMaskValues(backward), ref.scores, &report.mask);
    report.passed = report.passed && report.mask.within(report.tolerance);
  }
  std::ostringstream os;
  auto describe = [&](const char *name, const ErrorStats &stats) {
    os << name << ": max rel err " << stats.relative << " ("
       << stats.nanMismatches << " NaN, " << stats.infMismatches
       << " inf mismatches); ";
  };
  describe("dq", report.query);
  describe("dk", report.key);
  describe("dv", report.value);
  if (backward.hasGradMask)
    describe("dbias", report.mask);
  os << "tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}

//===----------------------------------------------------------------------===//
// The weights
//===----------------------------------------------------------------------===//

bool attn::makeWeightsData(const Problem &p, ProblemData &data,
                           WeightsData &weights, std::string &error) {
  weights.hasLse = p.spec.lse;
  weights.lseView = attn_tensor{};
  if (weights.hasLse) {
    ReferenceOutputs forward;
    if (!computeReference(p.spec, referenceInputs(data), forward, error))
      return false;
    weights.lseView = denseF32(weights.lse, {p.batch, p.headsQ, p.seqQ});
    for (size_t i = 0; i < forward.lse.size(); ++i)
      weights.lse[i] = static_cast<float>(forward.lse[i]);
  }
  const int64_t count = p.batch * p.headsQ * p.seqQ * p.seqK;
  weights.weights.assign(static_cast<size_t>(std::max<int64_t>(count, 1)),
                         std::numeric_limits<float>::quiet_NaN());
  attn_tensor &view = weights.weightsView;
  view = attn_tensor{};
  view.data = weights.weights.data();
  view.dtype = ATTN_F32;
  view.rank = 4;
  view.shape[0] = p.batch;
  view.shape[1] = p.headsQ;
  view.shape[2] = p.seqQ;
  view.shape[3] = p.seqK;
  view.strides[0] = p.headsQ * p.seqQ * p.seqK;
  view.strides[1] = p.seqQ * p.seqK;
  view.strides[2] = p.bshd ? 1 : p.seqK;
  view.strides[3] = p.bshd ? p.seqQ : 1;
  return true;
}

attn_status attn::runWeightsProblem(const attn_kernel_desc *kernel,
                                    ProblemData &data, WeightsData &weights,
                                    attn_thread_pool *pool) {
  attn_run_options options =
      callOptions(data.captureViews, data.dropoutP, data.dropoutSeed);
  return attn_run_weights_with(kernel, &data.query.view, &data.key.view,
                               data.hasMask ? &data.mask.view : nullptr,
                               weights.hasLse ? &weights.lseView : nullptr,
                               &weights.weightsView, &options, pool);
}

std::vector<double> attn::weightsValues(const WeightsData &weights) {
  const attn_tensor &view = weights.weightsView;
  std::vector<double> values;
  values.reserve(static_cast<size_t>(view.shape[0] * view.shape[1] *
                                     view.shape[2] * view.shape[3]));
  for (int64_t b = 0; b < view.shape[0]; ++b)
    for (int64_t h = 0; h < view.shape[1]; ++h)
      for (int64_t i = 0; i < view.shape[2]; ++i)
        for (int64_t j = 0; j < view.shape[3]; ++j)
          values.push_back(weights.weights[static_cast<size_t>(
              b * view.strides[0] + h * view.strides[1] + i * view.strides[2] +
              j * view.strides[3])]);
  return values;
}

CheckReport attn::checkWeightsAgainstReference(const Problem &p,
                                               const ProblemData &data,
                                               const WeightsData &weights) {
  CheckReport report;
  report.tolerance = tolerance(p.spec.elementType);
  std::vector<double> ref;
  std::string error;
  if (!computeReferenceWeights(p.spec, referenceInputs(data), ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  relativeError(weightsValues(weights), ref, &report.output);
  report.passed = report.output.within(report.tolerance);
  std::ostringstream os;
  describeErrors(os, "weights", report.output);
  os << "; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}

//===----------------------------------------------------------------------===//
// Linear attention
//===----------------------------------------------------------------------===//

void attn::makeLinearData(const Problem &p, ProblemData &data,
                          LinearData &linear) {
  linear.hasState = p.spec.linearState;
  linear.backward = p.spec.linearBackward;
  const int64_t d = p.spec.headDim, dv = p.spec.valueDim;
  std::mt19937_64 rng(p.seed ^ 0x5eedULL);
  // A state as an earlier call would leave it: S of either sign, z > 0
  // (for the backward's non-causal form, a forward's final state: z of
  // order Sk).
  std::uniform_real_distribution<float> state(-1.0f, 1.0f), norm(0.5f, 4.0f);
  float normScale = linear.backward && !p.spec.causal
                        ? float(std::max<int64_t>(p.seqK, 1))
                        : 1.0f;
  if (linear.hasState || linear.backward) {
    linear.state0View = denseF32(linear.state0, {p.batch, p.headsKv, d, dv});
    linear.normalizer0View =
        denseF32(linear.normalizer0, {p.batch, p.headsKv, d});
    for (float &x : linear.state0)
      x = state(rng) * normScale;
    for (float &x : linear.normalizer0)
      x = norm(rng) * normScale;
  }
  if (linear.hasState) {
    linear.stateView = denseF32(linear.state, {p.batch, p.headsKv, d, dv});
    linear.normalizerView =
        denseF32(linear.normalizer, {p.batch, p.headsKv, d});
    std::fill(linear.state.begin(), linear.state.end(),
              std::numeric_limits<float>::quiet_NaN());
    std::fill(linear.normalizer.begin(), linear.normalizer.end(),
              std::numeric_limits<float>::quiet_NaN());
  }
  if (!linear.backward)
    return;
  attn_dtype type = dtypeOf(p.spec.elementType);
  const int64_t q[4] = {p.batch, p.headsQ, p.seqQ, d};
  const int64_t k[4] = {p.batch, p.headsKv, p.seqK, d};
  const int64_t v[4] = {p.batch, p.headsKv, p.seqK, dv};
  const int64_t o[4] = {p.batch, p.headsQ, p.seqQ, dv};
  fill(data.output, rng, 1.0);
  allocate(linear.gradOutput, type, o, p.bshd);
  fill(linear.gradOutput, rng, 1.0);
  allocate(linear.gradQuery, type, q, p.bshd);
  allocate(linear.gradKey, type, k, p.bshd);
  allocate(linear.gradValue, type, v, p.bshd);
  for (HostTensor *t : {&linear.gradQuery, &linear.gradKey, &linear.gradValue})
    poison(*t);
  if (linear.hasState) {
    linear.gradState1View =
        denseF32(linear.gradState1, {p.batch, p.headsKv, d, dv});
    linear.gradNormalizer1View =
        denseF32(linear.gradNormalizer1, {p.batch, p.headsKv, d});
    std::uniform_real_distribution<float> small(-0.1f, 0.1f);
    for (float &x : linear.gradState1)
      x = small(rng);
    for (float &x : linear.gradNormalizer1)
      x = small(rng);
  }
}

attn_status attn::DeviceLinearProblem::upload(const ProblemData &data,
                                              const LinearData &linear) {
  hasState = linear.hasState;
  attn_status status = query.upload(data.query);
  if (status == ATTN_OK)
    status = key.upload(data.key);
  if (status == ATTN_OK)
    status = value.upload(data.value);
  if (status == ATTN_OK)
    status = output.upload(data.output);
  if (status == ATTN_OK && hasState)
    status = state0.upload(linear.state0, linear.state0View);
  if (status == ATTN_OK && hasState)
    status = normalizer0.upload(linear.normalizer0, linear.normalizer0View);
  if (status == ATTN_OK && hasState)
    status = state.upload(linear.state, linear.stateView);
  if (status == ATTN_OK && hasState)
    status = normalizer.upload(linear.normalizer, linear.normalizerView);
  return status;
}

attn_status attn::DeviceLinearProblem::run(const attn_kernel_desc *kernel) {
  return attn_run_linear(kernel, &query.view, &key.view, &value.view,
                         hasState ? &state0.view : nullptr,
                         hasState ? &normalizer0.view : nullptr, &output.view,
                         hasState ? &state.view : nullptr,
                         hasState ? &normalizer.view : nullptr, nullptr);
}

attn_status attn::DeviceLinearProblem::download(ProblemData &data,
                                                LinearData &linear) {
  attn_status status = output.download(data.output.bytes.data());
  if (status == ATTN_OK && hasState)
    status = state.download(linear.state.data());
  if (status == ATTN_OK && hasState)
    status = normalizer.download(linear.normalizer.data());
  return status;
}

attn_status attn::runLinearProblem(const attn_kernel_desc *kernel,
                                   ProblemData &data, LinearData &linear,
                                   attn_thread_pool *pool) {
  bool state = linear.hasState;
  if (linear.backward)
    return attn_run_linear_backward(
        kernel, &data.query.view, &data.key.view, &data.value.view,
        &data.output.view, &linear.gradOutput.view, &linear.state0View,
        &linear.normalizer0View, state ? &linear.gradState1View : nullptr,
        state ? &linear.gradNormalizer1View : nullptr, &linear.gradQuery.view,
        &linear.gradKey.view, &linear.gradValue.view,
        state ? &linear.stateView : nullptr,
        state ? &linear.normalizerView : nullptr, pool);
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    DeviceLinearProblem device;
    attn_status status = device.upload(data, linear);
    if (status == ATTN_OK)
      status = device.run(kernel);
    if (status == ATTN_OK)
      status = device.download(data, linear);
    return status;
  }
  return attn_run_linear(kernel, &data.query.view, &data.key.view,
                         &data.value.view,
                         state ? &linear.state0View : nullptr,
                         state ? &linear.normalizer0View : nullptr,
                         &data.output.view, state ? &linear.stateView : nullptr,
                         state ? &linear.normalizerView : nullptr, pool);
}

namespace {
/// The gradients of a linear attention backward problem against
/// computeReferenceLinearBackward.
CheckReport checkLinearBackward(const Problem &p, const ProblemData &data,
                                const LinearData &linear) {
  CheckReport report;
  report.tolerance = p.spec.elementType == ElementType::F32 ? 1e-4 : 2e-2;
  auto doubles = [](const std::vector<float> &v) {
    return std::vector<double>(v.begin(), v.end());
  };
  ReferenceLinearGradients ref;
  std::string error;
  if (!computeReferenceLinearBackward(
          p.spec, referenceInputs(data), outputValues(data),
          tensorValues(linear.gradOutput), doubles(linear.state0),
          doubles(linear.normalizer0), doubles(linear.gradState1),
          doubles(linear.gradNormalizer1), ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  std::ostringstream os;
  report.passed = true;
  auto compare = [&](const char *name, const std::vector<double> &got,
                     const std::vector<double> &want) {
    ErrorStats stats;
    relativeError(got, want, &stats);
    report.passed = report.passed && stats.within(report.tolerance);
    os << (os.tellp() > 0 ? "; " : "") << name << ": max rel err "
       << stats.relative;
  };
  compare("dQ", tensorValues(linear.gradQuery), ref.gradQuery);
  compare("dK", tensorValues(linear.gradKey), ref.gradKey);
  compare("dV", tensorValues(linear.gradValue), ref.gradValue);
  if (linear.hasState) {
    compare("dS0", doubles(linear.state), ref.gradState);
    compare("dz0", doubles(linear.normalizer), ref.gradNormalizer);
  }
  os << "; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}
} // namespace

CheckReport attn::checkLinearAgainstReference(const Problem &p,
                                              const ProblemData &data,
                                              const LinearData &linear) {
  if (linear.backward)
    return checkLinearBackward(p, data, linear);
  CheckReport report;
  report.tolerance = tolerance(p.spec.elementType);
  std::vector<double> state0(linear.state0.begin(), linear.state0.end()),
      normalizer0(linear.normalizer0.begin(), linear.normalizer0.end());
  const int64_t d = p.spec.headDim, dv = p.spec.valueDim;
  state0.resize(linear.hasState ? size_t(p.batch * p.headsKv * d * dv) : 0);
  normalizer0.resize(linear.hasState ? size_t(p.batch * p.headsKv * d) : 0);
  ReferenceLinear ref;
  std::string error;
  if (!computeReferenceLinear(p.spec, referenceInputs(data), state0,
                              normalizer0, ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  relativeError(outputValues(data), ref.output, &report.output);
  report.passed = report.output.within(report.tolerance);
  std::ostringstream os;
  describeErrors(os, "output", report.output);
  if (linear.hasState) {
    // The final state is f32 whatever the inputs: the f32 bound, relative
    // to its largest element, for f32 inputs; the inputs' bound otherwise.
    ErrorStats state, normalizer;
    relativeError(std::vector<double>(linear.state.begin(),
                                      linear.state.begin() + state0.size()),
                  ref.state, &state);
    relativeError(std::vector<double>(linear.normalizer.begin(),
                                      linear.normalizer.begin() +
                                          normalizer0.size()),
                  ref.normalizer, &normalizer);
    report.passed = report.passed && state.within(report.tolerance) &&
                    normalizer.within(report.tolerance);
    os << "; final state: max rel err " << state.relative
       << ", normalizer: max rel err " << normalizer.relative;
  }
  os << "; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}

//===----------------------------------------------------------------------===//
// Additive attention
//===----------------------------------------------------------------------===//

namespace {
/// `view` without its first `count` dims (each of size 1).
attn_tensor withoutLeadingDims(const attn_tensor &view, int count) {
  attn_tensor reduced = view;
  reduced.rank = view.rank - count;
  for (int d = 0; d < 4; ++d) {
    reduced.shape[d] = d < reduced.rank ? view.shape[d + count] : 0;
    reduced.strides[d] = d < reduced.rank ? view.strides[d + count] : 0;
  }
  return reduced;
}

RefTensor refView(const HostTensor &t) {
  return RefTensor::dense(t.values.data(), t.view.shape[0], t.view.shape[1],
                          t.view.shape[2], t.view.shape[3]);
}
} // namespace

void attn::makeAdditiveData(const Problem &p, AdditiveData &data) {
  const KernelSpec &spec = p.spec;
  attn_dtype type = dtypeOf(spec.elementType);
  std::mt19937_64 rng(p.seed);
  auto make = [&](HostTensor &t, std::initializer_list<int64_t> dims,
                  double scale) {
    int64_t shape[4] = {1, 1, 1, 1};
    std::copy(dims.begin(), dims.end(), shape + 4 - dims.size());
    allocate(t, type, shape, /*swapHeadsAndSeq=*/false);
    if (scale > 0)
      fill(t, rng, scale);
  };
  // Weights of the network scaled as a trained one's: tanh's inputs O(1).
  make(data.query, {p.batch, p.seqQ, spec.queryDim}, p.inputScale);
  make(data.keys, {p.batch, p.seqK, spec.headDim}, p.inputScale);
  make(data.values, {p.batch, p.seqK, spec.valueDim}, 1.0);
  make(data.queryWeight, {spec.attnDim, spec.queryDim},
       1.0 / std::sqrt(double(std::max<int64_t>(spec.queryDim, 1))));
  make(data.keyWeight, {spec.attnDim, spec.headDim},
       1.0 / std::sqrt(double(std::max<int64_t>(spec.headDim, 1))));
  make(data.scoreVector, {spec.attnDim}, 1.0);
  make(data.output, {p.batch, p.seqQ, spec.valueDim}, 0.0);

  data.hasMask = spec.mask != MaskKind::None;
  if (data.hasMask) {
    int64_t shape[4] = {1, spec.maskBroadcast[0] ? 1 : p.batch,
                        spec.maskBroadcast[2] ? 1 : p.seqQ, p.seqK};
    allocate(data.mask, ATTN_BOOL, shape, false);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    // With more than one row, the first keeps nothing: its O and P must
    // come out 0.
    bool emptyRow = shape[1] * shape[2] > 1;
    forEach(data.mask.view, [&](int64_t linear, int64_t offset) {
      bool firstRow = emptyRow && linear < p.seqK;
      double keep = firstRow || uniform(rng) < p.maskDropRate ? 0.0 : 1.0;
      data.mask.values[linear] =
          store(data.mask.bytes, ATTN_BOOL, offset, keep);
    });
  }
  data.hasWeights = spec.additiveWeights;
  if (data.hasWeights)
    data.weightsView = denseF32(data.weights, {p.batch, p.seqQ, p.seqK});
  poison(data.output);
  std::fill(data.weights.begin(), data.weights.end(),
            std::numeric_limits<float>::quiet_NaN());
  data.backward = spec.additiveBackward;
  if (data.backward) {
    make(data.gradOutput, {p.batch, p.seqQ, spec.valueDim}, 1.0);
    data.parts = p.seqQ >= 3 ? 3 : 1;
    data.gradQpView = denseF32(data.gradQp, {p.batch, p.seqQ, spec.attnDim});
    data.gradKpView =
        denseF32(data.gradKp, {p.batch, data.parts, p.seqK, spec.attnDim});
    data.gradValuesView =
        denseF32(data.gradValues, {p.batch, data.parts, p.seqK, spec.valueDim});
    data.gradVView = denseF32(data.gradV, {p.batch, data.parts, spec.attnDim});
    for (std::vector<float> *grad :
         {&data.gradQp, &data.gradKp, &data.gradValues, &data.gradV})
      std::fill(grad->begin(), grad->end(),
                std::numeric_limits<float>::quiet_NaN());
  }
}

attn_status attn::DeviceAdditiveProblem::upload(const AdditiveData &data) {
  hasMask = data.hasMask;
  hasWeights = data.hasWeights;
  attn_status status = query.upload(data.query);
  if (status == ATTN_OK)
    status = keys.upload(data.keys);
  if (status == ATTN_OK)
    status = values.upload(data.values);
  if (status == ATTN_OK)
    status = queryWeight.upload(data.queryWeight);
  if (status == ATTN_OK)
    status = keyWeight.upload(data.keyWeight);
  if (status == ATTN_OK)
    status = scoreVector.upload(data.scoreVector);
  if (status == ATTN_OK && hasMask)
    status = mask.upload(data.mask);
  if (status == ATTN_OK)
    status = output.upload(data.output);
  if (status == ATTN_OK && hasWeights)
    status = weights.upload(data.weights, data.weightsView);
  return status;
}

attn_status attn::DeviceAdditiveProblem::run(const attn_kernel_desc *kernel) {
  attn_tensor q = withoutLeadingDims(query.view, 1),
              k = withoutLeadingDims(keys.view, 1),
              v = withoutLeadingDims(values.view, 1),
              wq = withoutLeadingDims(queryWeight.view, 2),
              wk = withoutLeadingDims(keyWeight.view, 2),
              va = withoutLeadingDims(scoreVector.view, 3),
              m = withoutLeadingDims(mask.view, 1),
              o = withoutLeadingDims(output.view, 1);
  return attn_run_additive(kernel, &q, &k, &v, &wq, &wk, &va,
                           hasMask ? &m : nullptr, &o,
                           hasWeights ? &weights.view : nullptr, nullptr);
}

attn_status attn::DeviceAdditiveProblem::download(AdditiveData &data) {
  attn_status status = output.download(data.output.bytes.data());
  if (status == ATTN_OK && hasWeights)
    status = weights.download(data.weights.data());
  return status;
}

attn_status attn::runAdditiveProblem(const attn_kernel_desc *kernel,
                                     AdditiveData &data,
                                     attn_thread_pool *pool) {
  if (attn_kernel_device(kernel) == ATTN_DEVICE_CUDA) {
    DeviceAdditiveProblem device;
    attn_status status = device.upload(data);
    if (status == ATTN_OK)
      status = device.run(kernel);
    if (status == ATTN_OK)
      status = device.download(data);
    return status;
  }
  attn_tensor query = withoutLeadingDims(data.query.view, 1),
              keys = withoutLeadingDims(data.keys.view, 1),
              values = withoutLeadingDims(data.values.view, 1),
              queryWeight = withoutLeadingDims(data.queryWeight.view, 2),
              keyWeight = withoutLeadingDims(data.keyWeight.view, 2),
              scoreVector = withoutLeadingDims(data.scoreVector.view, 3),
              mask = withoutLeadingDims(data.mask.view, 1),
              output = withoutLeadingDims(data.output.view, 1);
  if (data.backward) {
    attn_tensor gradOutput = withoutLeadingDims(data.gradOutput.view, 1);
    return attn_run_additive_backward(
        kernel, &query, &keys, &values, &queryWeight, &keyWeight, &scoreVector,
        data.hasMask ? &mask : nullptr, &gradOutput, &data.gradQpView,
        &data.gradKpView, &data.gradValuesView, &data.gradVView, pool);
  }
  return attn_run_additive(kernel, &query, &keys, &values, &queryWeight,
                           &keyWeight, &scoreVector,
                           data.hasMask ? &mask : nullptr, &output,
                           data.hasWeights ? &data.weightsView : nullptr, pool);
}

namespace {
/// The kernel's gradients against computeReferenceAdditiveBackward: each
/// part-summed (in part order) and compared as a gradient.
CheckReport checkAdditiveGradients(const Problem &p, const AdditiveData &data,
                                   const ReferenceAdditiveInputs &in) {
  CheckReport report;
  report.tolerance = gradientTolerance(p.spec.elementType);
  ReferenceAdditiveGradients ref;
  std::string error;
  if (!computeReferenceAdditiveBackward(p.spec, in, refView(data.gradOutput),
                                        ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  // Sums over the parts (dim 1) of [B, P, inner] into [B, inner] (and over
  // B too for grad_v).
  auto sumParts = [&](const std::vector<float> &grad, int64_t inner,
                      bool overBatch) {
    int64_t batches = overBatch ? 1 : p.batch;
    std::vector<double> sum(size_t(batches * inner), 0.0);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t part = 0; part < data.parts; ++part)
        for (int64_t e = 0; e < inner; ++e)
          sum[size_t((overBatch ? 0 : b) * inner + e)] +=
              grad[size_t((b * data.parts + part) * inner + e)];
    return sum;
  };
  const int64_t a = p.spec.attnDim;
  std::vector<double> gradQp(data.gradQp.begin(),
                             data.gradQp.begin() + ref.gradQp.size());
  struct Compared {
    const char *name;
    std::vector<double> got;
    const std::vector<double> *want;
  } compared[] = {
      {"grad_qp", gradQp, &ref.gradQp},
      {"grad_kp", sumParts(data.gradKp, p.seqK * a, false), &ref.gradKp},
      {"grad_values",
       sumParts(data.gradValues, p.seqK * p.spec.valueDim, false),
       &ref.gradValues},
      {"grad_v", sumParts(data.gradV, a, true), &ref.gradV}};
  std::ostringstream os;
  report.passed = true;
  for (const Compared &c : compared) {
    ErrorStats stats;
    relativeError(c.got, *c.want, &stats);
    report.passed = report.passed && stats.within(report.tolerance);
    describeErrors(os, c.name, stats);
    os << "; ";
  }
  os << data.parts << " parts; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}
} // namespace

CheckReport attn::checkAdditiveAgainstReference(const Problem &p,
                                                const AdditiveData &data) {
  ReferenceAdditiveInputs in;
  in.query = refView(data.query);
  in.keys = refView(data.keys);
  in.values = refView(data.values);
  in.queryWeight = refView(data.queryWeight);
  in.keyWeight = refView(data.keyWeight);
  in.scoreVector = refView(data.scoreVector);
  if (data.hasMask)
    in.mask = refView(data.mask);
  if (data.backward)
    return checkAdditiveGradients(p, data, in);
  CheckReport report;
  report.tolerance = tolerance(p.spec.elementType);
  ReferenceAdditive ref;
  std::string error;
  if (!computeReferenceAdditive(p.spec, in, ref, error)) {
    report.message = "reference failed: " + error;
    return report;
  }
  relativeError(tensorValues(data.output), ref.output, &report.output);
  report.passed = report.output.within(report.tolerance);
  std::ostringstream os;
  describeErrors(os, "output", report.output);
  if (data.hasWeights) {
    // The weights are probabilities: their bound is absolute, as the
    // spec's max|P - ref|.
    ErrorStats weights;
    relativeError(
        std::vector<double>(data.weights.begin(),
                            data.weights.begin() + ref.weights.size()),
        ref.weights, &weights);
    report.passed = report.passed && !weights.mismatched() &&
                    weights.maxAbs <= report.tolerance;
    os << "; weights: max abs err " << weights.maxAbs;
  }
  os << "; tolerance " << report.tolerance;
  report.message = os.str();
  return report;
}
