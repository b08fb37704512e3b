# rl_add_area(NAME DEPENDENCY): the library rl_NAME from lib/rl/NAME/*.cc (less *_test.cc and
# *_bench.cc), linked PUBLIC to DEPENDENCY, and the GoogleTest binary rl_NAME_test from its
# *_test.cc, registered with ctest (more test properties, e.g. FIXTURES_REQUIRED tokenizer_npm,
# may follow DEPENDENCY). Does nothing while the folder has no sources yet.
function(rl_add_area name dependency)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_(test|bench)\\.cc$")
  if(NOT sources)
    return()
  endif()
  add_library(rl_${name} STATIC ${sources})
  target_link_libraries(rl_${name} PUBLIC ${dependency})
  target_include_directories(rl_${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(RL_BUILD_TESTS AND tests)
    find_package(GTest REQUIRED)
    include(GoogleTest)
    add_executable(rl_${name}_test ${tests})
    target_link_libraries(rl_${name}_test PRIVATE rl_${name} GTest::gtest GTest::gtest_main)
    # One OpenMP thread, waiting passively: tests share 2 cores with each other under ctest -j.
    gtest_discover_tests(rl_${name}_test DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 600
                         ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;OMP_NUM_THREADS=1" ${ARGN})
  endif()
endfunction()
