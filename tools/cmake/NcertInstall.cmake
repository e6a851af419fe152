# `cmake --install`: the ncert binary, the libraries an engine links to write and read dumps
# (ncert::dump_io, ncert::reference, ncert::packing, with ncert::formats and ncert::isolation
# under them), their public headers, a CMake package (find_package(ncert CONFIG)), the Python
# writer and the docs:
#
#   bin/ncert
#   include/ncert/{reference,packing,certify/isolation,certify/io}/*.h
#                                      headers keep their repository paths, so
#                                      "reference/status.h" resolves with include/ncert on the
#                                      include path
#   lib/libncert_{formats,reference,packing,isolation,dump_io}.a
#   lib/cmake/ncert/ncert{Config,ConfigVersion,Targets,Targets-<config>}.cmake
#   lib/python3.<minor>/dist-packages/ncert_dump   (site-packages for a non-Debian python3)
#   share/doc/ncert/                   README.md, docs/*.md, python/README.md
#
# The libraries' and the package's "lib" is CMAKE_INSTALL_LIBDIR (Debian's GNUInstallDirs makes
# it lib/<multiarch> for the prefix /usr); the Python folder is always under lib/, where the
# interpreter looks. Components: ncert_runtime, ncert_development, ncert_python, ncert_doc.
#
# Only public headers are installed: a header in detail/ is an internal of its module, and no
# public header includes one (the packaging test compiles every installed header against the
# installed tree alone, so a public header that started to would fail it).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(NCERT_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/ncert" CACHE STRING
    "Where the CMake package files go (relative to the prefix)")
set(NCERT_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/ncert")

# The umbrella target: everything an engine needs to write, read and check dumps.
add_library(ncert_umbrella INTERFACE)
target_link_libraries(ncert_umbrella INTERFACE ncert_dump_io ncert_reference ncert_packing)
add_library(ncert::ncert ALIAS ncert_umbrella)

# Exported as ncert::<name>, the same names as the in-tree aliases; the executable as ncert::cli
# (ncert::ncert is the umbrella library).
set_target_properties(ncert_formats PROPERTIES EXPORT_NAME formats)
set_target_properties(ncert_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(ncert_packing PROPERTIES EXPORT_NAME packing)
set_target_properties(ncert_dump_io PROPERTIES EXPORT_NAME dump_io)
set_target_properties(ncert_isolation PROPERTIES EXPORT_NAME isolation)
set_target_properties(ncert_umbrella PROPERTIES EXPORT_NAME ncert)
set_target_properties(ncert PROPERTIES EXPORT_NAME cli)

install(TARGETS ncert EXPORT ncertTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ncert_runtime)
# The bash completion and man page ncert-docgen writes from the command line at build time.
install(FILES ${NCERT_COMPLETION_FILE} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  COMPONENT ncert_runtime)
install(FILES ${NCERT_MANPAGE_FILE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT ncert_runtime)
install(TARGETS ncert_formats ncert_reference ncert_packing ncert_isolation ncert_dump_io ncert_umbrella
  EXPORT ncertTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ncert_development
  INCLUDES DESTINATION ${NCERT_INSTALL_INCLUDEDIR})

foreach(dir reference packing certify/isolation certify/io)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/ DESTINATION ${NCERT_INSTALL_INCLUDEDIR}/${dir}
    COMPONENT ncert_development
    FILES_MATCHING PATTERN "*.h"
    PATTERN "detail" EXCLUDE)
endforeach()

# The static libraries carry their private dependencies in the link interface
# ($<LINK_ONLY:HDF5::HDF5>, PkgConfig::XXHASH, ...): ncertConfig.cmake finds each of them.
install(EXPORT ncertTargets NAMESPACE ncert:: DESTINATION ${NCERT_INSTALL_CMAKEDIR}
  COMPONENT ncert_development)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ncertConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ncertConfig.cmake
  INSTALL_DESTINATION ${NCERT_INSTALL_CMAKEDIR})
# Before 1.0 a minor release may change the API (0.2 does not satisfy a request for 0.1);
# from 1.0 on, any release of the same major version does.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(ncert_compatibility SameMinorVersion)
else()
  set(ncert_compatibility SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ncertConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${ncert_compatibility})
install(FILES ${PROJECT_BINARY_DIR}/ncertConfig.cmake ${PROJECT_BINARY_DIR}/ncertConfigVersion.cmake
  DESTINATION ${NCERT_INSTALL_CMAKEDIR} COMPONENT ncert_development)

# The Python writer goes where Debian's /usr/bin/python3 looks under a prefix: for /usr/local,
# /usr/local/lib/python3.11/dist-packages is on its default sys.path (so is
# /usr/lib/python3.11/dist-packages for /usr); under any other prefix, PYTHONPATH names it.
# The interpreter is the one tests/CMakeLists.txt runs (Debian's first: a python3 earlier on
# PATH may be another installation). Without any python3 and without NCERT_INSTALL_PYTHONDIR,
# the package is not installed: its folder depends on the interpreter's version.
if(NOT DEFINED NCERT_INSTALL_PYTHONDIR)
  find_program(NCERT_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT NCERT_PYTHON3)
    find_program(NCERT_PYTHON3 NAMES python3)
  endif()
  if(NCERT_PYTHON3)
    execute_process(
      COMMAND ${NCERT_PYTHON3} -c [=[
import sys, sysconfig
folder = "dist-packages" if "deb_system" in sysconfig.get_scheme_names() else "site-packages"
print(f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/{folder}", end="")
]=]
      OUTPUT_VARIABLE ncert_python_dir RESULT_VARIABLE ncert_python_rc)
    if(NOT ncert_python_rc EQUAL 0)
      message(FATAL_ERROR "${NCERT_PYTHON3} could not report its version (exit ${ncert_python_rc})")
    endif()
    set(NCERT_INSTALL_PYTHONDIR "${ncert_python_dir}" CACHE STRING
        "Where the ncert_dump Python package goes (relative to the prefix)")
  else()
    message(STATUS "No python3: the ncert_dump package will not be installed "
                   "(-DNCERT_INSTALL_PYTHONDIR=lib/python3.<minor>/dist-packages installs it)")
  endif()
endif()
# The whole folder, so the member rules it validates with (schema_rules.json, generated from
# certify/io/schema_rules.cc) are installed with the code that loads them at import.
if(DEFINED NCERT_INSTALL_PYTHONDIR)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ncert_dump DESTINATION ${NCERT_INSTALL_PYTHONDIR}
    COMPONENT ncert_python
    PATTERN "__pycache__" EXCLUDE
    PATTERN "*.pyc" EXCLUDE)
endif()

# Docs keep the repository's layout, so the README's links (docs/design.md, ...) still resolve.
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT ncert_doc)
# The pages, the report's JSON Schema and the screenshots docs/cli.md shows.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
  COMPONENT ncert_doc FILES_MATCHING PATTERN "*.md" PATTERN "*.json" PATTERN "*.png")
install(FILES ${PROJECT_SOURCE_DIR}/python/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/python
  COMPONENT ncert_doc)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
  COMPONENT ncert_doc FILES_MATCHING PATTERN "*.md")
