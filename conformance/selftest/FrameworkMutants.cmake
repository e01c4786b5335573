# drt_add_framework_mutant(NAME PATCH)
# Builds libdrt_framework.so with PATCH applied to the framework sources
# (src/, or a header of include/), into
# ${CMAKE_BINARY_DIR}/mutants/NAME/lib under the same soname as the real one:
# a program run with LD_LIBRARY_PATH pointing there uses the mutant. Only the
# files the patch changes are recompiled; the rest are the real objects.
# Sets DRT_MUTANT_LIBDIR_<NAME> in the caller's scope.
function(drt_add_framework_mutant name patch)
  set(dir ${CMAKE_BINARY_DIR}/mutants/${name})
  set(framework_dir ${PROJECT_SOURCE_DIR}/framework)
  file(STRINGS ${patch} touched REGEX "^\\+\\+\\+ ")
  list(TRANSFORM touched REPLACE "^\\+\\+\\+ b/([^\t ]+).*$" "\\1")
  if(NOT touched)
    message(FATAL_ERROR "mutant ${name}: ${patch} changes no file")
  endif()
  # A patch to a public header changes every source that may include it:
  # all of them are recompiled, against the patched copy of include/.
  set(header_patched FALSE)
  foreach(file ${touched})
    if(file MATCHES "^include/")
      set(header_patched TRUE)
    endif()
  endforeach()
  set(patched_sources)
  set(objects)
  foreach(source ${DRT_FRAMEWORK_SOURCES})
    get_filename_component(unit ${source} NAME_WE)
    if(header_patched OR source IN_LIST touched)
      list(APPEND patched_sources ${dir}/${source})
    else()
      list(APPEND objects $<TARGET_OBJECTS:drt_framework_obj_${unit}>)
    endif()
  endforeach()
  file(GLOB_RECURSE framework_files ${framework_dir}/src/*
       ${framework_dir}/include/*)
  add_custom_command(
    OUTPUT ${dir}/applied.stamp ${patched_sources}
    COMMAND ${CMAKE_COMMAND} -DSRC=${framework_dir} -DDST=${dir}
            -DPATCH=${patch} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ApplyMutant.cmake
    DEPENDS ${patch} ${framework_files}
            ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ApplyMutant.cmake
    COMMENT "Applying mutant ${name}")
  # The patched copy of include/ is no declared output: a change to a
  # framework header that leaves the copied sources as they were must still
  # recompile them, after the copy, not before.
  set_source_files_properties(${patched_sources} PROPERTIES
                              OBJECT_DEPENDS ${dir}/applied.stamp)
  set(target drt_framework_mutant_${name})
  add_library(${target} SHARED ${patched_sources} ${objects})
  target_include_directories(${target} PRIVATE ${dir}/include
                                               ${framework_dir}/include
                                               ${dir}/src)
  target_link_libraries(${target} PRIVATE Threads::Threads)
  # Mutants are bugs on purpose; their warnings are not the project's.
  target_compile_options(${target} PRIVATE -w -g0)
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME drt_framework
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR}
    LIBRARY_OUTPUT_DIRECTORY ${dir}/lib)
  set(DRT_MUTANT_LIBDIR_${name} ${dir}/lib PARENT_SCOPE)
endfunction()
