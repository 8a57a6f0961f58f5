# lit configuration of attn's FileCheck suite.
import os
import platform

import lit.formats

config.name = "attn"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir", ".test", ".c"]
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt",
                   "unit", "Inputs", "fuzz"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.attn_binary_dir, "test")

# Tools come from the build tree first, then LLVM's.
path = [config.attn_tools_dir, config.llvm_tools_dir,
        config.environment.get("PATH", os.environ.get("PATH", ""))]
config.environment["PATH"] = os.pathsep.join(path)

config.substitutions.append(("%attn_runtime_include",
                             config.attn_runtime_include))
config.substitutions.append(("%attn_runtime_lib_dir",
                             config.attn_runtime_lib_dir))
config.substitutions.append(("%attn_src", config.attn_source_dir))
config.substitutions.append(("%attn_build", config.attn_binary_dir))
# MLIR's runner support libraries (vector.print), for mlir-runner tests.
config.substitutions.append(("%mlir_c_runner_utils", os.path.join(
    os.path.dirname(config.llvm_tools_dir), "lib",
    "libmlir_c_runner_utils.so")))

# Features the tests can require.
try:
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    if " avx2 " in flags and " fma " in flags:
        config.available_features.add("avx2")
    if " avx512f " in flags:
        config.available_features.add("avx512f")
    if " avx512_bf16 " in flags:
        config.available_features.add("avx512bf16")
except OSError:
    pass
# A CUDA driver here (the GPU tests that expect "no GPU" then do not).
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
if config.attn_have_cuda_toolkit:
    config.available_features.add("cuda-toolkit")
    config.substitutions.append(("%ptxas", config.attn_ptxas))
# Sanitizer builds: a program that links the instrumented runtime but not the
# sanitizer's own runtime cannot start, so consumer-project tests skip there.
if getattr(config, "attn_sanitize", ""):
    config.available_features.add("sanitizer")
