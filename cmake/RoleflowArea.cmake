# rl_add_area(NAME DEPENDENCY): the library rl_NAME from lib/rl/NAME/*.cc (less *_test.cc and
# *_bench.cc), linked PUBLIC to DEPENDENCY, and the GoogleTest binary rl_NAME_test from its
# *_test.cc, registered with ctest (more test properties, e.g. FIXTURES_REQUIRED tokenizer_npm,
# may follow DEPENDENCY). Does nothing while the folder has no sources yet.

# The test files that touch a device, and the CPU/GPU-agnostic ones that scripts/gpu-check.sh
# runs beside them (paths under lib/rl). An area's share of them is compiled once, into the
# object library rl_NAME_device_tests, which both rl_NAME_test and rl_gpu_test
# (tests/CMakeLists.txt) link: a GPU machine's short lease builds these 13 files instead of every
# test of four libraries, and a CPU build does not compile them twice.
set(RL_DEVICE_TESTS
    model/device_test.cc model/sampler_test.cc model/kv_cache_test.cc model/transformer_test.cc
    train/adamw_test.cc train/grpo_test.cc train/grpo_trainer_test.cc train/data_parallel_test.cc
    train/grpo_data_parallel_test.cc train/device_train_test.cc
    rollout/policy_test.cc dist/group_gpu_test.cc dist/group_generate_gpu_test.cc)

# rl_precompile_aten(TARGET): TARGET's units start from a precompiled <ATen/ATen.h>, rl_model's
# (RL_PRECOMPILE_ATEN): parsing it took a third of a libtorch unit's compile time (grpo_loop.cc:
# 30 s of CPU, 20 s with it). One header for every target: the others reuse rl_model's, as
# GCC accepts a header built with other -D flags when the header does not use them.
function(rl_precompile_aten target)
  if(NOT RL_PRECOMPILE_ATEN)
    return()
  endif()
  if(target STREQUAL "rl_model")
    target_precompile_headers(rl_model PRIVATE <ATen/ATen.h>)
  else()
    target_precompile_headers(${target} REUSE_FROM rl_model)
  endif()
endfunction()

function(rl_add_area name dependency)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_(test|bench)\\.cc$")
  if(NOT sources)
    return()
  endif()
  add_library(rl_${name} STATIC ${sources})
  target_link_libraries(rl_${name} PUBLIC ${dependency})
  target_include_directories(rl_${name} PUBLIC ${PROJECT_SOURCE_DIR}/lib)
  set(aten OFF)  # whether the area sees libtorch (and so starts from the precompiled ATen)
  if(name STREQUAL "model" OR "rl_model" IN_LIST dependency)
    set(aten ON)
    rl_precompile_aten(rl_${name})
  endif()
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
  if(RL_BUILD_TESTS AND tests)
    find_package(GTest REQUIRED)
    include(GoogleTest)
    set(device "")
    foreach(t ${tests})
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/lib/rl ${t})
      if(rel IN_LIST RL_DEVICE_TESTS)
        list(APPEND device ${t})
      endif()
    endforeach()
    list(REMOVE_ITEM tests ${device})
    add_executable(rl_${name}_test ${tests})
    target_link_libraries(rl_${name}_test PRIVATE rl_${name} GTest::gtest GTest::gtest_main)
    if(aten)
      rl_precompile_aten(rl_${name}_test)
    endif()
    if(device)
      add_library(rl_${name}_device_tests OBJECT ${device})
      target_link_libraries(rl_${name}_device_tests PUBLIC rl_${name} GTest::gtest)
      target_compile_definitions(rl_${name}_device_tests PRIVATE RL_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      target_link_libraries(rl_${name}_test PRIVATE rl_${name}_device_tests)  # its objects, linked in
      if(aten)
        rl_precompile_aten(rl_${name}_device_tests)
      endif()
      set_property(GLOBAL APPEND PROPERTY RL_DEVICE_TEST_LIBRARIES rl_${name}_device_tests)
    endif()
    # One OpenMP thread, waiting passively: tests share 2 cores with each other under ctest -j.
    gtest_discover_tests(rl_${name}_test DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 600
                         ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;OMP_NUM_THREADS=1" ${ARGN})
  endif()
endfunction()
