# ncert::openblas: OpenBLAS's serial build, linked statically by its own path (Debian's
# libopenblas-serial-dev). The reference takes its f64 GEMM for y* where Eigen's kernels are the
# AVX2 ones (reference/detail/gemm_openblas.cc): on an AVX2 AMD EPYC (Zen 3) it ran the
# reference's blocks 1.2-1.4x faster. The serial build because the reference calls it from each
# of its own threads, one block a call: it starts no thread pool (the pthread build starts one
# at load, and again in every forked child, whose threads spin beside the reference's) and keeps
# no process-wide thread count to set; Debian builds it with USE_LOCKING, so concurrent calls
# are safe (its blas_memory_alloc takes a lock). Never through the libblas.so.3 alternative,
# which may point at any BLAS; and static, so that no process pays the 3 ms the shared library
# adds to its start (docs/performance.md, "y* by OpenBLAS where Eigen's kernels are AVX2").
# Included by the build and by the installed ncertConfig.cmake: one definition for both. Sets
# NCERT_OPENBLAS_FOUND.
if(TARGET ncert::openblas)
  set(NCERT_OPENBLAS_FOUND TRUE)
  return()
endif()
find_library(NCERT_OPENBLAS_SERIAL_LIBRARY NAMES libopenblas.a
             PATHS /usr/lib/x86_64-linux-gnu/openblas-serial /usr/lib/aarch64-linux-gnu/openblas-serial
             NO_DEFAULT_PATH)
find_path(NCERT_OPENBLAS_SERIAL_INCLUDE_DIR NAMES cblas.h
          PATHS /usr/include/x86_64-linux-gnu/openblas-serial /usr/include/aarch64-linux-gnu/openblas-serial
          NO_DEFAULT_PATH)
if(NCERT_OPENBLAS_SERIAL_LIBRARY AND NCERT_OPENBLAS_SERIAL_INCLUDE_DIR)
  add_library(ncert::openblas STATIC IMPORTED)
  set_target_properties(ncert::openblas PROPERTIES IMPORTED_LOCATION "${NCERT_OPENBLAS_SERIAL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCERT_OPENBLAS_SERIAL_INCLUDE_DIR}" INTERFACE_LINK_LIBRARIES m)
  set(NCERT_OPENBLAS_FOUND TRUE)
else()
  set(NCERT_OPENBLAS_FOUND FALSE)
endif()
