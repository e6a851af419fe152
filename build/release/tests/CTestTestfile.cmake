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
subdirs("unit")
