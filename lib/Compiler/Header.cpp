//===- Header.cpp - The C header of a compiled kernel library -------------===//
//
// The header a C or C++ caller includes next to an attn-compile output. It
// embeds the kernel ABI (guarded, so that it coexists with the runtime's
// copy), declares each kernel's entry points and descriptor, and defines a
// static inline convenience function per kernel that runs all work items,
// through the caller's parallel-for when given one. For CUDA kernels it
// gives the entry name, launch shape and shared memory of each instead.
//
//===----------------------------------------------------------------------===//
#include "lib/Compiler/Compiler.h"

#include "llvm/ADT/STLExtras.h"

#include <sstream>

#include "lib/Compiler/KernelAbiText.inc" // generated

/// What a caller launching a CUDA kernel itself needs: the entry name, the
/// launch shape as a function of the call's sizes, the parameters. An
/// attention kernel's grid is (query tiles, Hq, B); a linear attention
/// kernel's (value column tiles, Hkv, B), its "rows" value columns; an
/// additive attention kernel's (query tiles, B, 1); a backward kernel's
/// (key tiles + G query tiles, Hkv, B).
static void gpuKernelDeclarations(std::ostringstream &h,
                                  const attn::KernelSpec &spec,
                                  const attn::GpuKernelInfo &info) {
  const std::string &n = spec.name;
  const char *argsType = spec.linear     ? "attn_linear_args"
                         : spec.additive ? "attn_additive_args"
                         : spec.backward ? "attn_backward_args"
                                         : "attn_kernel_args";
  h << "#define " << n << "_ENTRY \"" << info.name << "\"\n"
    << "#define " << n << "_BLOCK_THREADS " << info.blockThreads << "\n"
    << "#define " << n << "_BLOCK_" << (spec.linear ? "COLUMNS " : "ROWS ")
    << info.blockRows << "\n"
    << "/* Dynamic shared memory per block; above 49152 bytes raise the "
       "function's\n * CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES first. "
       "*/\n"
    << "#define " << n << "_SHARED_BYTES " << info.sharedBytes << "\n";
  if (spec.linear)
    h << "/* grid = (ceil(Dv / columns), Hkv, B), block = (threads, 1, 1). "
         "*/\n";
  else if (spec.additive)
    h << "/* grid = (ceil(Sq / rows), B, 1), block = (threads, 1, 1). */\n";
  else if (spec.backward)
    h << "/* grid = (ceil(Sk / rows) + Hq / Hkv * ceil(Sq / rows), Hkv, B), "
         "block = (threads,\n * 1, 1): blocks of `rows` keys (dK, dV), then "
         "of `rows` query rows (dQ). */\n";
  else
    h << "/* grid = (ceil(Sq / rows), Hq, B), block = (threads, 1, 1). */\n";
  h << "static inline void " << n << "_launch_shape(const " << argsType
    << " *args, unsigned grid[3],\n"
    << "    unsigned block[3]) {\n";
  if (spec.linear)
    h << "  grid[0] = " << (spec.valueDim + info.blockRows - 1) / info.blockRows
      << ";\n"
      << "  grid[1] = (unsigned)args->heads_kv;\n"
      << "  grid[2] = (unsigned)args->batch;\n";
  else if (spec.backward)
    h << "  const attn_kernel_args *f = &args->forward;\n"
      << "  const int64_t rows = " << info.blockRows << ";\n"
      << "  const int64_t group = f->heads_kv > 0 ? f->heads_q / f->heads_kv "
         ": 0;\n"
      << "  grid[0] = (unsigned)((f->seq_k + rows - 1) / rows +\n"
      << "                       group * ((f->seq_q + rows - 1) / rows));\n"
      << "  grid[1] = (unsigned)f->heads_kv;\n"
      << "  grid[2] = (unsigned)f->batch;\n";
  else
    h << "  grid[0] = (unsigned)((args->seq_q + " << info.blockRows - 1
      << ") / " << info.blockRows << ");\n"
      << (spec.additive ? "  grid[1] = (unsigned)args->batch;\n"
                          "  grid[2] = 1;\n"
                        : "  grid[1] = (unsigned)args->heads_q;\n"
                          "  grid[2] = (unsigned)args->batch;\n");
  h << "  block[0] = " << info.blockThreads
    << ";\n  block[1] = 1;\n  block[2] = 1;\n}\n"
    << "/* The kernel's parameters for cuLaunchKernel (device pointers in "
       "args):\n * "
    << (spec.linear     ? "attn_gpu_linear_kernel_params(&"
        : spec.additive ? "attn_gpu_additive_kernel_params(&"
        : spec.backward ? "attn_gpu_backward_kernel_params(&"
                        : "attn_gpu_kernel_params(&")
    << n << "_desc, args, values, pointers). */\n\n";
}

/// `<n>_task` (a work-item range for a parallel-for) and `<n>`, which runs
/// a whole call on entry points taking an `argsType`.
static void wholeCall(std::ostringstream &h, const std::string &n,
                      const char *argsType) {
  h << "static inline void " << n
    << "_task(void *args, int64_t begin, int64_t end) {\n"
    << "  " << n << "_run((const " << argsType << " *)args, begin, end);\n}\n";
  h << "/* Runs the whole call; parallel_for may be NULL (this thread "
       "only). */\n";
  h << "static inline void " << n << "(const " << argsType
    << " *args, attn_parallel_for_fn parallel_for,\n"
    << "    void *pool) {\n"
    << "  int64_t n = " << n << "_work_items(args);\n"
    << "  if (n <= 0)\n    return;\n"
    << "  if (parallel_for)\n"
    << "    parallel_for(pool, n, " << n << "_task, (void *)args);\n"
    << "  else\n    " << n << "_run(args, 0, n);\n}\n\n";
}

/// A backward kernel's entry points and a helper that runs a whole call.
static void backwardDeclarations(std::ostringstream &h,
                                 const attn::KernelSpec &spec,
                                 const attn::GpuKernelInfo *gpu) {
  const std::string &n = spec.name;
  h << "/* The gradients dQ, dK, dV (attn_backward_args: the forward's call "
       "with its\n * O and LSE, dO"
    << (spec.lse ? ", dLSE" : "") << ", and dQ, dK, dV"
    << (spec.gradMask ? ", dM" : "") << " to write)";
  for (size_t number = 0; number < spec.captures.size(); ++number)
    if (spec.gradCaptures & (1u << number))
      h << ";\n * args->grad_captures[" << number << "]: capture " << number
        << "'s gradient, one row of its elements per work item "
           "(b * Hkv + hkv),\n * written (sum the rows)";
  h << ". */\n";
  if (gpu) {
    gpuKernelDeclarations(h, spec, *gpu);
    return;
  }
  h << "int64_t " << n << "_work_items(const attn_backward_args *args);\n";
  h << "void " << n
    << "_run(const attn_backward_args *args, int64_t begin, int64_t end);\n";
  wholeCall(h, n, "attn_backward_args");
}

/// A weights kernel's entry points: the forward's args with W in `output`.
static void weightsDeclarations(std::ostringstream &h,
                                const attn::KernelSpec &spec) {
  const std::string &n = spec.name;
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * The attention weights W [B,Hq,Sq,Sk] f32 (args->output) of Q "
       "[B,Hq,Sq,"
    << spec.headDim << "], K [B,Hkv,Sk," << spec.headDim << "]"
    << (spec.mask != attn::MaskKind::None ? ", mask [B,Hq,Sq,Sk]" : "")
    << (spec.lse ? ", the forward's LSE [B,Hq,Sq] f32 (args->lse, read)" : "")
    << "; args->value is not read.\n"
    << " * The args are not checked here: attn_run_weights (attn/runtime.h) "
       "checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  h << "int64_t " << n << "_work_items(const attn_kernel_args *args);\n";
  h << "void " << n
    << "_run(const attn_kernel_args *args, int64_t begin, int64_t end);\n";
  wholeCall(h, n, "attn_kernel_args");
}

/// A linear attention backward kernel's entry points.
static void linearBackwardDeclarations(std::ostringstream &h,
                                       const attn::KernelSpec &spec) {
  const std::string &n = spec.name;
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * " << (spec.causal ? "Causal" : "Non-causal")
    << " linear attention's gradients (attn_linear_backward_args): dQ "
       "[B,Hq,Sq,"
    << spec.headDim << "], dK [B,Hkv,Sk," << spec.headDim << "], dV [B,Hkv,Sk,"
    << spec.valueDim << "] of Q, K, V, the forward's O and dO [B,Hq,Sq,"
    << spec.valueDim << "] and its " << (spec.causal ? "initial" : "final")
    << " state S [B,Hkv,D,Dv], z [B,Hkv,D] f32"
    << (spec.causal ? " (Sq = Sk)" : "")
    << (spec.linearState
            ? ";\n * reads dS1 [B,Hkv,D,Dv] and dz1 [B,Hkv,D] (the final "
              "state's gradients), writes dS0 and dz0 (the initial state's)"
            : "")
    << ".\n * The args are not checked here: attn_run_linear_backward "
       "(attn/runtime.h) checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  h << "int64_t " << n
    << "_work_items(const attn_linear_backward_args *args);\n";
  h << "void " << n
    << "_run(const attn_linear_backward_args *args, int64_t begin, "
       "int64_t end);\n";
  wholeCall(h, n, "attn_linear_backward_args");
}

/// A linear attention kernel's entry points (a GPU kernel's launch shape).
static void linearDeclarations(std::ostringstream &h,
                               const attn::KernelSpec &spec,
                               const attn::GpuKernelInfo *gpu) {
  const std::string &n = spec.name;
  if (spec.linearBackward) {
    linearBackwardDeclarations(h, spec);
    return;
  }
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * Linear attention (attn_linear_args): O [B,Hq,Sq," << spec.valueDim
    << "] of Q [B,Hq,Sq," << spec.headDim << "], K [B,Hkv,Sk," << spec.headDim
    << "], V [B,Hkv,Sk," << spec.valueDim << "]"
    << (spec.causal ? ", causal (Sq = Sk)" : "")
    << (spec.linearState
            ? ";\n * reads S0 [B,Hkv,D,Dv] and z0 [B,Hkv,D] f32, writes the "
              "final S1 and z1"
            : "")
    << ".\n * The args are not checked here: attn_run_linear "
       "(attn/runtime.h) checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  if (gpu) {
    gpuKernelDeclarations(h, spec, *gpu);
    return;
  }
  h << "int64_t " << n << "_work_items(const attn_linear_args *args);\n";
  h << "void " << n
    << "_run(const attn_linear_args *args, int64_t begin, int64_t end);\n";
  wholeCall(h, n, "attn_linear_args");
}

/// An additive attention backward kernel's entry points.
static void additiveBackwardDeclarations(std::ostringstream &h,
                                         const attn::KernelSpec &spec) {
  const std::string &n = spec.name;
  int64_t a = spec.attnDim;
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * Additive attention's gradients (attn_additive_backward_args): "
       "from query [B,Sq,"
    << spec.queryDim << "], keys [B,Sk," << spec.headDim << "], values [B,Sk,"
    << spec.valueDim << "], W_q [" << a << "," << spec.queryDim << "], W_k ["
    << a << "," << spec.headDim << "], v [" << a << "], dO [B,Sq,"
    << spec.valueDim << "]"
    << (spec.mask != attn::MaskKind::None
            ? ", keep-mask [B,Sq,Sk] (stride 0 on broadcast dims)"
            : "")
    << ": grad_qp [B,Sq," << a << "], and per part of the rows grad_kp [B,P,Sk,"
    << a << "], grad_values [B,P,Sk," << spec.valueDim << "], grad_v [B,P," << a
    << "], all f32.\n * The args are not checked here: "
       "attn_run_additive_backward (attn/runtime.h) checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  h << "int64_t " << n
    << "_work_items(const attn_additive_backward_args *args);\n";
  h << "void " << n
    << "_run(const attn_additive_backward_args *args, int64_t begin, "
       "int64_t end);\n";
  wholeCall(h, n, "attn_additive_backward_args");
}

/// An additive attention kernel's entry points.
static void additiveDeclarations(std::ostringstream &h,
                                 const attn::KernelSpec &spec,
                                 const attn::GpuKernelInfo *gpu) {
  const std::string &n = spec.name;
  if (spec.additiveBackward) {
    additiveBackwardDeclarations(h, spec);
    return;
  }
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * Additive attention (attn_additive_args): O [B,Sq," << spec.valueDim
    << "] of query [B,Sq," << spec.queryDim << "], keys [B,Sk," << spec.headDim
    << "], values [B,Sk," << spec.valueDim << "], W_q [" << spec.attnDim << ","
    << spec.queryDim << "], W_k [" << spec.attnDim << "," << spec.headDim
    << "], v [" << spec.attnDim << "]"
    << (spec.mask != attn::MaskKind::None
            ? ", keep-mask [B,Sq,Sk] (stride 0 on broadcast dims)"
            : "")
    << (spec.additiveWeights ? ", weights [B,Sq,Sk] f32" : "")
    << ".\n * The args are not checked here: attn_run_additive "
       "(attn/runtime.h) checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  if (gpu) {
    gpuKernelDeclarations(h, spec, *gpu);
    return;
  }
  h << "int64_t " << n << "_work_items(const attn_additive_args *args);\n";
  h << "void " << n
    << "_run(const attn_additive_args *args, int64_t begin, int64_t end);\n";
  wholeCall(h, n, "attn_additive_args");
}

/// A multi-head attention layer's entry points.
static void mhaDeclarations(std::ostringstream &h,
                            const attn::KernelSpec &spec) {
  const std::string &n = spec.name;
  int64_t e = spec.embedDim;
  h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
    << " * Multi-head attention layer (attn_mha_args), " << spec.mhaHeads
    << " heads of " << spec.headDim << ": output [B,Sq," << e
    << "] of query [B,Sq," << e << "], key [B,Sk," << spec.keyEmbedDim
    << "], value [B,Sk," << spec.valueEmbedDim << "], W_q [" << e << "," << e
    << "], W_k [" << e << "," << spec.keyEmbedDim << "], W_v [" << e << ","
    << spec.valueEmbedDim << "], W_o [" << e << "," << e << "]"
    << (spec.mhaBias ? ", in_bias [" + std::to_string(3 * e) + "], out_bias [" +
                           std::to_string(e) + "]"
                     : std::string())
    << (spec.mask != attn::MaskKind::None
            ? ", mask [B," + std::to_string(spec.mhaHeads) +
                  ",Sq,Sk] (stride 0 on broadcast dims)"
            : std::string())
    << ".\n * The args are not checked here: attn_run_mha "
       "(attn/runtime.h) checks them. */\n";
  h << "extern const attn_kernel_desc " << n << "_desc;\n";
  h << "int64_t " << n << "_work_items(const attn_mha_args *args);\n";
  h << "void " << n
    << "_run(const attn_mha_args *args, int64_t begin, int64_t end);\n";
  wholeCall(h, n, "attn_mha_args");
}

std::string attn::kernelHeader(const std::vector<KernelSpec> &specs,
                               const std::string &guard,
                               const std::string &librarySymbol,
                               const std::vector<GpuKernelInfo> *gpu,
                               const CompileOptions *options) {
  // What a kernel's modifiers capture, one line each.
  auto capturesText = [](const KernelSpec &spec) {
    std::ostringstream text;
    for (auto [index, capture] : llvm::enumerate(spec.captures)) {
      text << " * args->captures[" << index << "]: "
           << (capture.type == CaptureType::F32    ? "f32"
               : capture.type == CaptureType::Bool ? "bool (a byte each)"
               : capture.type == CaptureType::I32  ? "i32"
                                                   : "i64")
           << " [";
      for (int d = 0; d < capture.rank; ++d)
        text << (d ? ", " : "")
             << (capture.staticSizes[d] < 0
                     ? std::string("?")
                     : std::to_string(capture.staticSizes[d]));
      text << "], read by its score_mod/mask_mod.\n";
    }
    return text.str();
  };
  std::ostringstream h;
  h << "/* Generated by " << compilerVersion() << ". Do not edit. */\n";
  h << "#ifndef " << guard << "\n#define " << guard << "\n\n";
  h << kKernelAbiText << "\n";
  h << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h << "/* The library's kernel table (what attn_module_from_library takes). "
       "*/\nextern const attn_library "
    << librarySymbol << ";\n\n";
  for (auto [index, spec] : llvm::enumerate(specs)) {
    const std::string &n = spec.name;
    if (spec.weights) {
      weightsDeclarations(h, spec);
      continue;
    }
    if (spec.linear) {
      linearDeclarations(h, spec, gpu ? &(*gpu)[index] : nullptr);
      continue;
    }
    if (spec.additive) {
      additiveDeclarations(h, spec, gpu ? &(*gpu)[index] : nullptr);
      continue;
    }
    if (spec.mha) {
      mhaDeclarations(h, spec);
      continue;
    }
    h << "/* " << n << ": " << printKernelSpec(spec) << "\n"
      << " * Q [B,Hq,Sq," << spec.headDim << "], K [B,Hkv,Sk," << spec.headDim
      << "], V [B,Hkv,Sk," << spec.valueDim << "], O [B,Hq,Sq," << spec.valueDim
      << "]"
      << (spec.mask != MaskKind::None ? ", mask [B,Hq,Sq,Sk] (stride 0 on "
                                        "broadcast dims)"
                                      : "")
      << (spec.lse ? ", LSE [B,Hq,Sq] f32" : "")
      << (spec.sinks ? ", sinks [Hq] f32 (args->sinks)" : "") << ".\n"
      << capturesText(spec)
      << " * The args are not checked here: attn_run (attn/runtime.h) checks "
         "them. */\n";
    h << "extern const attn_kernel_desc " << n << "_desc;\n";
    if (spec.backward) {
      backwardDeclarations(h, spec, gpu ? &(*gpu)[index] : nullptr);
      continue;
    }
    if (gpu) {
      gpuKernelDeclarations(h, spec, (*gpu)[index]);
      continue;
    }
    h << "int64_t " << n << "_work_items(const attn_kernel_args *args);\n";
    h << "void " << n
      << "_run(const attn_kernel_args *args, int64_t begin, int64_t end);\n";
    if (options && hasKeySplit(spec, *options))
      h << "/* The key split's phases (kernel_abi.h: attn_split_*_fn). */\n"
        << "int64_t " << n
        << "_partial_work_items(const attn_kernel_args *args, int64_t "
           "splits);\n"
        << "void " << n
        << "_partial_run(const attn_kernel_args *args, int64_t splits,\n"
        << "    float *workspace, int64_t begin, int64_t end);\n"
        << "int64_t " << n
        << "_merge_work_items(const attn_kernel_args *args, int64_t "
           "splits);\n"
        << "void " << n
        << "_merge_run(const attn_kernel_args *args, int64_t splits,\n"
        << "    float *workspace, int64_t begin, int64_t end);\n";
    if (spec.blockTable[0] >= 0 && !spec.weights)
      h << "/* Fills the block table (capture " << spec.blockTable[0]
        << ", blocks of " << spec.blockTable[1] << " x " << spec.blockTable[2]
        << ") from the mask_mod: the\n * kernel's args, of which it reads "
           "the sizes and the captures and writes\n * only the table "
           "(attn_fill_block_table checks them). */\n"
        << "int64_t " << n
        << "_block_table_work_items(const attn_kernel_args *args);\n"
        << "void " << n
        << "_block_table_run(const attn_kernel_args *args, int64_t begin, "
           "int64_t end);\n";
    wholeCall(h, n, "attn_kernel_args");
  }
  h << "#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << guard << " */\n";
  return h.str();
}
