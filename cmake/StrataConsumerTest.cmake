# ctest driver (cmake -P): installs the current build into a fresh prefix, then configures,
# builds and runs tests/consumer against it with find_package(strata).
# Inputs: STRATA_BUILD_DIR, CONSUMER_SOURCE_DIR, WORK_DIR, CONFIG, GENERATOR, CXX_COMPILER.
foreach(var STRATA_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "StrataConsumerTest.cmake: -D${var}=... is missing")
  endif()
endforeach()
if(NOT CONFIG)
  set(CONFIG Release)
endif()

function(run_step what)
  message(STATUS "consumer test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer test: ${what} failed (${rc})")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run_step("install to ${prefix}"
  ${CMAKE_COMMAND} --install ${STRATA_BUILD_DIR} --prefix ${prefix} --config ${CONFIG})

# The installed package must not point back into the source or build tree.
file(GLOB_RECURSE package_files ${prefix}/*.cmake)
get_filename_component(source_dir ${CONSUMER_SOURCE_DIR}/../.. ABSOLUTE)
foreach(f IN LISTS package_files)
  file(READ ${f} text)
  foreach(dir ${source_dir} ${STRATA_BUILD_DIR})
    string(FIND "${text}" "${dir}/" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "consumer test: installed ${f} refers to ${dir}")
    endif()
  endforeach()
endforeach()

# Installed tools run from the prefix alone (their RPATH finds the installed library).
if(EXISTS ${prefix}/bin/strata-ckpt)
  run_step("run ${prefix}/bin/strata-ckpt --help" ${prefix}/bin/strata-ckpt --help)
endif()

run_step("configure ${CONSUMER_SOURCE_DIR}"
  ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_BUILD_TYPE=${CONFIG} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
run_step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/build --config ${CONFIG})
find_program(consumer strata_consumer PATHS ${WORK_DIR}/build ${WORK_DIR}/build/${CONFIG} NO_DEFAULT_PATH REQUIRED)
run_step("run" ${consumer})
