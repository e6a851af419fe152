# CMake generated Testfile for 
# Source directory: /work/main/tests/unit
# Build directory: /work/main/build/release/tests/unit
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
include("/work/main/build/release/tests/unit/reference_formats_test[1]_include.cmake")
include("/work/main/build/release/tests/unit/reference_formats_test_labels.cmake")
include("/work/main/build/release/tests/unit/certify_dump_io_test[1]_include.cmake")
include("/work/main/build/release/tests/unit/certify_dump_io_test_labels.cmake")
include("/work/main/build/release/tests/unit/reference_linear_test[1]_include.cmake")
include("/work/main/build/release/tests/unit/reference_linear_test_labels.cmake")
include("/work/main/build/release/tests/unit/packing_test[1]_include.cmake")
include("/work/main/build/release/tests/unit/packing_test_labels.cmake")
