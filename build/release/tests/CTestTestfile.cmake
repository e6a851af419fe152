# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/release/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
include("/work/main/build/release/tests/sweep_test[1]_include.cmake")
include("/work/main/build/release/tests/sweep_test_labels.cmake")
include("/work/main/build/release/tests/sweep_self_test[1]_include.cmake")
include("/work/main/build/release/tests/sweep_self_test_labels.cmake")
include("/work/main/build/release/tests/check_integration_test[1]_include.cmake")
include("/work/main/build/release/tests/check_integration_test_labels.cmake")
add_test([=[cli_contract]=] "/work/main/tests/cli/cli_test.sh" "/work/main/build/release/certify/ncert" "/work/main/build/release/tests/cli-scratch")
set_tests_properties([=[cli_contract]=] PROPERTIES  LABELS "integration" TIMEOUT "600" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;14;add_test;/work/main/tests/CMakeLists.txt;0;")
subdirs("unit")
