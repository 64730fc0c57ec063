# Test helpers. Labels: unit, dist, reference, gpu, slurm, slow (none yet).
find_package(GTest REQUIRED)
include(GoogleTest)

# Builds every unit-test binary (the sanitizer job builds only these).
add_custom_target(strata_all_unit_tests)

# strata_add_unit_test(name src...): one gtest binary, registered as one ctest test per
# binary (keeps ctest start-up cheap on 2 cores) with label `unit`.
function(strata_add_unit_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE strata::strata GTest::gtest_main)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_options(${name} PRIVATE ${STRATA_WARNINGS})
  add_dependencies(strata_all_unit_tests ${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit ENVIRONMENT "OMP_NUM_THREADS=2;OPENBLAS_NUM_THREADS=1")
endfunction()

# strata_add_dist_test(name NP n src... [ENV var=value...] [MPIEXEC_ARGS arg...]
#                      [EXPECT_LINES regex count] [LABELS label...]): a gtest binary run under
# mpirun -np n, label `dist` (plus LABELS, e.g. gpu). The binary is built once per name: a second call with the same
# name and another NP (sources may be omitted) registers the same binary again.
# EXPECT_LINES: the test passes when exactly `count` output lines match `regex`, whatever
# mpirun's exit status (for fault tests in which a rank dies).
function(strata_add_dist_test name)
  cmake_parse_arguments(ARG "" "NP" "ENV;MPIEXEC_ARGS;EXPECT_LINES;LABELS" ${ARGN})
  if(NOT TARGET ${name})
    add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
    target_link_libraries(${name} PRIVATE strata::strata GTest::gtest)
    target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)  # helpers spelled from tests/
    target_compile_options(${name} PRIVATE ${STRATA_WARNINGS})
  endif()
  set(cmd ${MPIEXEC_EXECUTABLE} --oversubscribe ${ARG_MPIEXEC_ARGS} -np ${ARG_NP} $<TARGET_FILE:${name}>)
  if(ARG_EXPECT_LINES)
    list(GET ARG_EXPECT_LINES 0 regex)
    list(GET ARG_EXPECT_LINES 1 count)
    string(REPLACE ";" "|" cmd_string "${cmd}")
    add_test(NAME ${name}_np${ARG_NP} COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${cmd_string}" "-DREGEX=${regex}"
             "-DCOUNT=${count}" -P ${PROJECT_SOURCE_DIR}/cmake/StrataExpectLines.cmake)
  else()
    add_test(NAME ${name}_np${ARG_NP} COMMAND ${cmd})
  endif()
  set_tests_properties(${name}_np${ARG_NP} PROPERTIES LABELS "dist;${ARG_LABELS}" PROCESSORS ${ARG_NP} TIMEOUT 120
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;${ARG_ENV}")
endfunction()
