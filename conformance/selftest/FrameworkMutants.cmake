# drt_add_framework_mutant(NAME PATCH)
# Builds libdrt_framework.so from the framework sources with PATCH applied,
# into ${CMAKE_BINARY_DIR}/mutants/NAME/lib, under the same soname as the real
# one: a program run with LD_LIBRARY_PATH pointing there uses the mutant.
# Sets DRT_MUTANT_LIBDIR_<NAME> in the caller's scope.
function(drt_add_framework_mutant name patch)
  set(dir ${CMAKE_BINARY_DIR}/mutants/${name})
  set(framework_dir ${PROJECT_SOURCE_DIR}/framework)
  set(originals ${DRT_FRAMEWORK_SOURCES})
  list(TRANSFORM originals PREPEND ${framework_dir}/)
  file(GLOB private_headers ${framework_dir}/src/*.h)
  set(patched ${DRT_FRAMEWORK_SOURCES})
  list(TRANSFORM patched PREPEND ${dir}/)
  add_custom_command(
    OUTPUT ${dir}/applied.stamp ${patched}
    COMMAND ${CMAKE_COMMAND} -DSRC=${framework_dir} -DDST=${dir}
            -DPATCH=${patch} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ApplyMutant.cmake
    DEPENDS ${patch} ${originals} ${private_headers}
            ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ApplyMutant.cmake
    COMMENT "Applying mutant ${name}")
  set(target drt_framework_mutant_${name})
  add_library(${target} SHARED ${patched})
  target_include_directories(${target} PRIVATE ${framework_dir}/include
                                               ${dir}/src)
  target_link_libraries(${target} PRIVATE Threads::Threads)
  # Mutants are bugs on purpose; their warnings are not the project's.
  target_compile_options(${target} PRIVATE -w)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME drt_framework
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    LIBRARY_OUTPUT_DIRECTORY ${dir}/lib)
  set(DRT_MUTANT_LIBDIR_${name} ${dir}/lib PARENT_SCOPE)
endfunction()
