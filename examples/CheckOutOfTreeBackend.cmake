# The installed package as a user meets it: drt installs into a fresh
# prefix, which then moves (the package is relocatable); the example backend
# (examples/out-of-tree-backend), which knows nothing but find_package(drt),
# configures and builds against it and runs its own ctest: the suite, the
# stored scenarios and the Behaviour tests, once with the backend linked into
# programs of its own and once loaded as a plugin by the installed programs.
#   cmake -DBUILD=<drt build> -DEXAMPLE=<example source> -DWORK=<folder>
#         -DGENERATOR=<generator> ["-DSUITE_OPTIONS=OPTION ..."]
#         -P CheckOutOfTreeBackend.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD}
    --prefix ${WORK}/staging)
file(RENAME ${WORK}/staging ${WORK}/prefix)
foreach(installed bin/drt-conformance bin/drt-replay bin/drt-behaviour
        lib/cmake/drt/drtConfig.cmake lib/cmake/drt/drtConfigVersion.cmake
        include/drt/BackendRegistry.h include/drt/conformance/Programs.h
        share/drt/scenarios/runs-and-outputs.scn)
  if(NOT EXISTS ${WORK}/prefix/${installed})
    message(FATAL_ERROR "the package lacks ${installed}")
  endif()
endforeach()
# Moved, the programs still find their libraries.
run("the moved drt-conformance" ${WORK}/prefix/bin/drt-conformance --list)

run("configuring the example" ${CMAKE_COMMAND} -S ${EXAMPLE}
    -B ${WORK}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=RelWithDebInfo
    -DCMAKE_PREFIX_PATH=${WORK}/prefix
    "-DHOST_HEAP_SUITE_OPTIONS=${SUITE_OPTIONS}")
run("building the example" ${CMAKE_COMMAND} --build ${WORK}/build -j2)
run("the example's tests" ${CMAKE_COMMAND} -E chdir ${WORK}/build
    ctest -j2 --output-on-failure)
message(STATUS "${output}")
foreach(route host_heap host_heap_plugin)
  foreach(kind conformance scenario behaviour)
    if(NOT output MATCHES "${route}\\.${kind}[^\n]* Passed")
      message(FATAL_ERROR "no passing ${kind} test of ${route}:\n${output}")
    endif()
  endforeach()
endforeach()
if(NOT output MATCHES "host_heap_not_resident\\.conformance[^\n]* Passed")
  message(FATAL_ERROR "no passing suite without resident tensors:\n${output}")
endif()

# Without resident tensors, against the fake device: the family whose inputs
# are resident on the reference device runs (cases and steps, not skipped).
separate_arguments(options UNIX_COMMAND "${SUITE_OPTIONS}")
run("the suite without resident tensors against fake"
    ${WORK}/prefix/bin/drt-conformance
    --plugin ${WORK}/build/libhost_heap_plugin.so --backend host-heap
    --param resident=0 --against fake --filter resident-elsewhere
    ${options})
message(STATUS "${output}")
if(NOT output MATCHES
   "resident-elsewhere +host-heap +resident=0 +[1-9][0-9]* +[1-9][0-9]* +passed")
  message(FATAL_ERROR "resident-elsewhere did not run without resident "
                      "tensors against fake:\n${output}")
endif()
