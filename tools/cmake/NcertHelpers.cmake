# Shared build helpers: warnings, floating-point discipline, sanitizers, coverage, and the test
# registrar.

# Flags every ncert target gets. -ffp-contract=off: the K-walk emulation must round a*b and
# then the add separately ("seq") unless it asks for fma() explicitly ("seq-fma"); letting the
# compiler fuse would silently change the emulated bits. -fno-fast-math is GCC's default but is
# spelled out because NaN/Inf semantics and compensated sums depend on it.
function(ncert_target_defaults target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -ffp-contract=off -fno-fast-math)
  if(NCERT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(NCERT_MARCH)
    target_compile_options(${target} PRIVATE -march=${NCERT_MARCH})
  endif()
  ncert_apply_sanitizers(${target})
  if(NCERT_COVERAGE)
    # gcov's format (.gcno beside each object, .gcda written at exit), read by gcovr; clang's
    # is read with `llvm-cov-14 gcov` (docs/testing.md "Coverage").
    # -fprofile-update=single: GCC otherwise updates the counters atomically in a program built
    # with -pthread (OpenMP), and a locked add in every inner loop of the reference keeps it
    # from vectorizing: the qwen-mixer long test took over 14 CPU minutes instead of ~1.5. Counts
    # of lines run by two threads at once may then be short; a line run at all still counts.
    target_compile_options(${target} PRIVATE --coverage -fprofile-update=single)
    target_link_options(${target} PRIVATE --coverage)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      # The counters in a loop's body stop clang's vectorizer (reference/detail/weight_rows.cc's
      # `omp simd` loop, vectorized without --coverage): a coverage build counts, it is not fast.
      target_compile_options(${target} PRIVATE -Wno-pass-failed)
    endif()
  endif()
endfunction()

function(ncert_apply_sanitizers target)
  if(NCERT_SANITIZE)
    list(JOIN NCERT_SANITIZE "," san)
    target_compile_options(${target} PRIVATE -fsanitize=${san} -fno-sanitize-recover=all
                                             -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=${san})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
      # Instrumented loads and stores (TSan's __tsan_read4, ...) can stop clang's vectorizer,
      # which then warns about each `omp simd` loop it left scalar (-Wpass-failed, an error
      # under -Werror): a sanitizer build is for defects, not for speed.
      target_compile_options(${target} PRIVATE -Wno-pass-failed)
    elseif(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC's manual (-fsanitize=address): "sanitizers tend to increase the rate of false
      # positive warnings, most notably those around -Wmaybe-uninitialized". GCC 12 reports one
      # inside libstdc++'s <regex> (std::function moved out of a _State in regex_automaton.h)
      # in every test that builds a std::regex; the release build keeps the warning.
      target_compile_options(${target} PRIVATE -Wno-maybe-uninitialized)
    endif()
  endif()
endfunction()

# ncert_add_gtest(name LABELS l1 [l2...] SOURCES a.cc [b.cc...] LIBS lib... [TIMEOUT s])
# One executable per test file group; every TEST is discovered and registered with CTest.
function(ncert_add_gtest name)
  cmake_parse_arguments(arg "" "TIMEOUT" "LABELS;SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  ncert_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(${name} PRIVATE NCERT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    TEST_LIST ${name}_TESTS
    PROPERTIES TIMEOUT ${arg_TIMEOUT})
  # Labels and environment are set by a script that runs after discovery: a list passed through
  # gtest_discover_tests(PROPERTIES ...) loses its separators in the generated script.
  # OMP_NUM_THREADS=2: the OpenMP paths run with a real team (the determinism tests switch
  # between 1 and 2 threads themselves).
  set(script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  file(WRITE ${script} "set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${arg_LABELS}\" "
                       "ENVIRONMENT \"NCERT_TEST_TMP=${CMAKE_CURRENT_BINARY_DIR}/tmp;OMP_NUM_THREADS=2\")\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${script})
  ncert_label_targets("${arg_LABELS}" ${name})
endfunction()

# ncert_label_targets(labels target...): the targets a test of these labels runs. Each label
# gathers its targets in a global property; tests/CMakeLists.txt makes `<label>_tests` targets of
# the sanitizer labels from them, which the sanitize and tsan build presets build alone. A test
# added with a label thus brings its executable into that stage's build, with no list to keep.
function(ncert_label_targets labels)
  foreach(label IN LISTS labels)
    set_property(GLOBAL APPEND PROPERTY NCERT_LABEL_TARGETS_${label} ${ARGN})
  endforeach()
endfunction()
