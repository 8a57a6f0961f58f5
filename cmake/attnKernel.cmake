# attn_add_kernel(<target> NAME <name> SPEC "<spec>" [OPTIONS <attn-compile options>...])
# attn_add_kernel(<target> NAME <name> MLIR <file.mlir> [OPTIONS ...])
#
# Runs attn-compile at build time and links the kernel object into
# <target>, with its generated header <name>.h on the include path. With
# SPEC the kernel is named <name>; with MLIR each attn.attention in the file
# is a kernel named after its function. The kernel table is
# `<name>_library` (pass it to attn_module_from_library for checked calls
# through attn::runtime). The command re-runs when the spec, the .mlir file
# or attn-compile changes.
function(attn_add_kernel target)
  cmake_parse_arguments(ARG "" "NAME;SPEC;MLIR" "OPTIONS" ${ARGN})
  if(NOT ARG_NAME)
    message(FATAL_ERROR "attn_add_kernel(${target}): NAME is required")
  endif()
  if((ARG_SPEC AND ARG_MLIR) OR (NOT ARG_SPEC AND NOT ARG_MLIR))
    message(FATAL_ERROR
      "attn_add_kernel(${target}): give exactly one of SPEC or MLIR")
  endif()
  set(dir "${CMAKE_CURRENT_BINARY_DIR}/attn_kernels")
  set(object "${dir}/${ARG_NAME}${CMAKE_C_OUTPUT_EXTENSION}")
  set(header "${dir}/${ARG_NAME}.h")
  if(ARG_SPEC)
    set(input --spec "name=${ARG_NAME},${ARG_SPEC}")
    set(depends)
  else()
    get_filename_component(mlir "${ARG_MLIR}" ABSOLUTE)
    set(input "${mlir}")
    set(depends "${mlir}")
  endif()
  add_custom_command(
    OUTPUT "${object}" "${header}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${dir}"
    COMMAND attn::compile ${input} --emit=object -o "${object}"
            --header "${header}" --library-symbol "${ARG_NAME}_library"
            ${ARG_OPTIONS}
    DEPENDS attn::compile ${depends}
    COMMENT "attn-compile ${ARG_NAME}"
    VERBATIM)
  target_sources(${target} PRIVATE "${object}" "${header}")
  target_include_directories(${target} PRIVATE "${dir}")
  target_link_libraries(${target} PRIVATE attn::kernel_abi)
endfunction()
