# ctest driver (cmake -P): a build of the library target alone (no tests, examples,
# benchmarks or CUDA; strata-ckpt never built) must still install: `cmake --install` puts the
# headers, the library and the package files (strataConfig.cmake) in the prefix. Before
# strata-ckpt's install rule was OPTIONAL, the install stopped at it with nothing of that.
# Inputs: SOURCE_DIR, WORK_DIR, GENERATOR, CXX_COMPILER.
foreach(var SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "StrataPartialInstallTest.cmake: -D${var}=... is missing")
  endif()
endforeach()

function(run_step what)
  message(STATUS "partial install test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "partial install test: ${what} failed (${rc})")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(build ${WORK_DIR}/build)
set(prefix ${WORK_DIR}/prefix)
run_step("configure ${build}" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_TESTS=OFF
  -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCHMARKS=OFF -DSTRATA_WITH_CUDA=OFF -DSTRATA_WERROR=OFF)
run_step("build the target strata alone" ${CMAKE_COMMAND} --build ${build} --target strata --parallel 2)
if(EXISTS ${build}/tools/strata_ckpt/strata-ckpt)
  message(FATAL_ERROR "partial install test: strata-ckpt was built, so the test checks nothing")
endif()
run_step("install to ${prefix}" ${CMAKE_COMMAND} --install ${build} --prefix ${prefix})
file(GLOB config ${prefix}/lib*/cmake/strata/strataConfig.cmake)
file(GLOB library ${prefix}/lib*/libstrata.so*)
foreach(what IN ITEMS ${prefix}/include/strata/strata.h ${prefix}/include/strata/tensor/tensor.h)
  if(NOT EXISTS ${what})
    message(FATAL_ERROR "partial install test: ${what} was not installed")
  endif()
endforeach()
if(NOT config OR NOT library)
  message(FATAL_ERROR "partial install test: strataConfig.cmake ('${config}') or libstrata ('${library}') missing")
endif()
message(STATUS "partial install test: headers, libstrata and strataConfig.cmake installed without strata-ckpt")
