# Backends loaded at run time: drt-conformance and drt-replay load --plugin
# and DRT_PLUGINS libraries, refuse one that does not load or registers
# nothing (exit 2, naming the file and the reason), and print a replay
# command that loads the plugins again and really replays the failure.
#   cmake -DCONFORMANCE=... -DREPLAY=... -DPLUGIN=... -DFRAMEWORK=...
#         -DSCENARIO=... -DWORK=... -P CheckPlugins.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# Both programs refuse plugin \p plugin with exit 2 and \p pattern.
function(expect_refusal plugin pattern)
  foreach(command "${CONFORMANCE}" "${REPLAY};${SCENARIO}")
    execute_process(COMMAND ${command} --plugin ${plugin} --backend fake
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "${pattern}")
      message(FATAL_ERROR "${command} --plugin ${plugin}: expected exit 2 "
                          "and '${pattern}', got ${rc}:\n${out}${err}")
    endif()
  endforeach()
endfunction()

expect_refusal(${WORK}/no-such.so
               "plugin '${WORK}/no-such.so': No such file")
file(WRITE ${WORK}/not-a-library.so "text")
expect_refusal(${WORK}/not-a-library.so
               "plugin '${WORK}/not-a-library.so' cannot be loaded: .+")
# The framework itself registers no backend.
expect_refusal(${FRAMEWORK} "plugin '${FRAMEWORK}' registered no new backend")

execute_process(COMMAND ${CONFORMANCE} --plugin ${PLUGIN} --list
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\n  host-heap\n.*parameter resident=1")
  message(FATAL_ERROR "--list with the plugin should show host-heap and its "
                      "parameter, got ${rc}:\n${out}${err}")
endif()
execute_process(COMMAND ${REPLAY} ${SCENARIO} --plugin ${PLUGIN}
                        --backend host-heap
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the scenario should pass on the plugin's backend, got "
                      "${rc}:\n${out}${err}")
endif()

# A failure found with a plugin loaded through the environment: the printed
# command loads it with --plugin, and replays the failure as it is (the
# environment still naming the same plugin loads it once).
get_filename_component(canonical ${PLUGIN} REALPATH)
set(ENV{DRT_PLUGINS} ":${PLUGIN}:")
execute_process(
  COMMAND ${CONFORMANCE} --backend mutant:accounting-drift
          --filter view-sharing --fail-fast --failures-dir ${WORK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REGEX MATCH "replay: drt-replay --plugin ([^ ]+) [^\n]*" replay
       "${out}")
if(NOT rc EQUAL 1 OR NOT CMAKE_MATCH_1 STREQUAL canonical)
  message(FATAL_ERROR "expected a failure whose replay command loads "
                      "${canonical}, got ${rc}:\n${out}${err}")
endif()
string(REGEX REPLACE "^replay: drt-replay " "" arguments "${replay}")
separate_arguments(arguments UNIX_COMMAND "${arguments}")
execute_process(COMMAND ${REPLAY} ${arguments} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "the printed replay command (${replay}) should fail "
                      "again on the mutant, got ${rc}:\n${out}${err}")
endif()
