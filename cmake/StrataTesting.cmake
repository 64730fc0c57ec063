# Test helpers. Labels: unit, dist, reference, gpu, slow.
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

# strata_add_dist_test(name NP n src...): a gtest binary run under mpirun -np n, label `dist`.
function(strata_add_dist_test name)
  cmake_parse_arguments(ARG "" "NP" "" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE strata::strata GTest::gtest)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_options(${name} PRIVATE ${STRATA_WARNINGS})
  add_test(NAME ${name}_np${ARG_NP}
    COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe -np ${ARG_NP} $<TARGET_FILE:${name}>)
  set_tests_properties(${name}_np${ARG_NP} PROPERTIES LABELS dist PROCESSORS ${ARG_NP}
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endfunction()
