# ctest script (tests/CMakeLists.txt, test tools_servesim_no_cuda): the simulator executable depends on no CUDA
# library. ldd lists the shared libraries it loads (none may be libcudart, libcublas, libcublasLt or libcuda); nm
# lists its own symbols, which would hold cudart's or cuBLAS's if either were linked statically.
#   cmake -DEXE=<path to servesim> -DNM=<nm> -P servesim_no_cuda.cmake
execute_process(COMMAND ldd ${EXE} OUTPUT_VARIABLE libs RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ldd ${EXE} failed (${rc})")
endif()
if(NOT libs MATCHES "libstdc\\+\\+")
  message(FATAL_ERROR "ldd ${EXE} printed no libstdc++; cannot judge its output:\n${libs}")
endif()
if(libs MATCHES "lib(cudart|cublas|cublasLt|cuda)[.]so")
  message(FATAL_ERROR "${EXE} loads a CUDA library:\n${libs}")
endif()
if(NM)
  execute_process(COMMAND ${NM} ${EXE} OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} ${EXE} failed (${rc})")
  endif()
  if(symbols MATCHES "[ \n](cudaMalloc|cudaLaunchKernel|cublasCreate_v2|cublasLtCreate)[@ \n]")
    message(FATAL_ERROR "${EXE} contains CUDA runtime or cuBLAS symbols (${CMAKE_MATCH_1})")
  endif()
endif()
message(STATUS "${EXE}: no CUDA library loaded or linked")
