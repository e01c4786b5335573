# drt_add_conformance_tests: the conformance suite of the installed drt
# package, built and registered with ctest for one backend of the caller's
# own build.
#
#   drt_add_conformance_tests(TARGET target BACKEND name [NAME name]
#                             [PARAMS key=value ...] [AGAINST backend]
#                             [SUITE_OPTIONS option ...] [LABELS label ...])
#
# TARGET is the library that registers backend BACKEND (DRT_REGISTER_BACKEND).
# A STATIC, OBJECT or SHARED library is linked (a static one whole, so its
# registration is kept) into programs of its own: NAME-conformance,
# NAME-replay and NAME-behaviour, whose failure reports name
# NAME-replay; the first two hold the fake reference device too. A MODULE library is a plugin: the package's drt-conformance,
# drt-replay and drt-behaviour load it with --plugin.
#
# NAME (default: TARGET) names the tests and programs, so that one target
# can be registered in several configurations (PARAMS resident=0).
#
# The ctest tests, each labelled drt, BACKEND and the LABELS given:
#   NAME.conformance       every property, in every configuration the
#                          backend declares (label conformance);
#   NAME.scenario.FILE     every stored regression scenario of the package
#                          (label scenario); skipped when its expectations
#                          need a capability the configuration lacks;
#   NAME.refused.FILE      every stored scenario the harness must refuse,
#                          with the refusal it must print;
#   NAME.behaviour...      the Behaviour tests, one per rule of the contract
#                          and configuration (label behaviour; a plugin
#                          runs them as one test).
# PARAMS fixes backend parameters in every test (--param); AGAINST runs the
# suite in lockstep with a second backend (fake, the reference device);
# SUITE_OPTIONS are more drt-conformance options (--time-budget 2, --seed 7).
function(drt_add_conformance_tests)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "TARGET;BACKEND;NAME;AGAINST"
                        "PARAMS;SUITE_OPTIONS;LABELS")
  if(NOT ARG_TARGET OR NOT ARG_BACKEND)
    message(FATAL_ERROR "drt_add_conformance_tests needs TARGET and BACKEND")
  endif()
  if(NOT TARGET ${ARG_TARGET})
    message(FATAL_ERROR
      "drt_add_conformance_tests: TARGET ${ARG_TARGET} is not a target")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "drt_add_conformance_tests: unexpected arguments "
                        "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  set(name ${ARG_TARGET})
  if(ARG_NAME)
    set(name ${ARG_NAME})
  endif()
  set(parameters)
  foreach(parameter IN LISTS ARG_PARAMS)
    if(NOT parameter MATCHES "^[^=]+=")
      message(FATAL_ERROR "drt_add_conformance_tests: PARAMS expects "
                          "key=value, got '${parameter}'")
    endif()
    list(APPEND parameters --param ${parameter})
  endforeach()
  set(against)
  if(ARG_AGAINST)
    set(against --against ${ARG_AGAINST})
  endif()
  set(labels drt ${ARG_BACKEND} ${ARG_LABELS})
  set(failures ${CMAKE_CURRENT_BINARY_DIR}/${name}-failures)

  get_target_property(type ${ARG_TARGET} TYPE)
  if(type STREQUAL "MODULE_LIBRARY")
    set(load --plugin $<TARGET_FILE:${ARG_TARGET}>)
    set(conformance $<TARGET_FILE:drt::drt-conformance>)
    set(replay $<TARGET_FILE:drt::drt-replay>)
    set(behaviour $<TARGET_FILE:drt::drt-behaviour>)
  else()
    set(load)
    if(type STREQUAL "STATIC_LIBRARY")
      set(backend "$<LINK_LIBRARY:WHOLE_ARCHIVE,${ARG_TARGET}>")
    elseif(type STREQUAL "SHARED_LIBRARY")
      # Nothing in the programs calls the library: only its initialisers
      # register the backend, so it must not be dropped as unneeded.
      set(backend "-Wl,--no-as-needed" ${ARG_TARGET})
    else()
      set(backend ${ARG_TARGET})
    endif()
    set(sources ${CMAKE_CURRENT_BINARY_DIR}/${name}-drt)
    file(GENERATE OUTPUT ${sources}/conformance.cpp CONTENT
"#include \"drt/conformance/Programs.h\"
int main(int argc, char **argv) {
  return drt::conformance::conformanceProgram(
      argc, argv, {\"${name}-conformance\", \"$<TARGET_FILE:${name}-replay>\"});
}
")
    file(GENERATE OUTPUT ${sources}/replay.cpp CONTENT
"#include \"drt/conformance/Programs.h\"
int main(int argc, char **argv) {
  return drt::conformance::replayProgram(argc, argv, {\"${name}-replay\"});
}
")
    # The backend and parameters are built in: ctest's discovery lists the
    # tests with --gtest_list_tests alone.
    set(arguments "\"--backend\", \"${ARG_BACKEND}\"")
    foreach(argument IN LISTS parameters)
      string(APPEND arguments ", \"${argument}\"")
    endforeach()
    file(GENERATE OUTPUT ${sources}/behaviour.cpp CONTENT
"#include \"drt/conformance/Behaviour.h\"
int main(int argc, char **argv) {
  return drt::conformance::behaviourTestsMain(argc, argv, {${arguments}});
}
")
    add_executable(${name}-conformance ${sources}/conformance.cpp)
    target_link_libraries(${name}-conformance PRIVATE drt::conformance
                          ${backend})
    add_executable(${name}-replay ${sources}/replay.cpp)
    target_link_libraries(${name}-replay PRIVATE drt::conformance ${backend})
    if(TARGET drt::behaviour_tests)
      add_executable(${name}-behaviour ${sources}/behaviour.cpp)
      target_link_libraries(${name}-behaviour PRIVATE drt::behaviour_tests
                            ${backend})
    endif()
    # The fake reference device is part of the harness, as in the package's
    # programs: the partner of AGAINST fake, and the device beside yours
    # where a scenario declares one of its own (`device ref backend=fake`).
    target_link_libraries(${name}-conformance PRIVATE drt::backend_fake)
    target_link_libraries(${name}-replay PRIVATE drt::backend_fake)
    set(conformance $<TARGET_FILE:${name}-conformance>)
    set(replay $<TARGET_FILE:${name}-replay>)
  endif()

  add_test(NAME ${name}.conformance
           COMMAND ${conformance} ${load} --backend ${ARG_BACKEND} ${parameters}
                   ${against} --failures-dir ${failures}
                   --junit ${failures}/conformance.xml
                   --report ${failures}/conformance.md ${ARG_SUITE_OPTIONS})
  set_tests_properties(${name}.conformance PROPERTIES
                       LABELS "${labels};conformance")

  file(GLOB stored ${DRT_SCENARIO_DIR}/*.scn)
  foreach(scenario IN LISTS stored)
    get_filename_component(scenario_name ${scenario} NAME_WE)
    add_test(NAME ${name}.scenario.${scenario_name}
             COMMAND ${replay} ${scenario} ${load} --backend ${ARG_BACKEND}
                     ${parameters})
    # 77: a scenario written for capabilities the configuration lacks.
    set_tests_properties(${name}.scenario.${scenario_name} PROPERTIES
                         LABELS "${labels};scenario" SKIP_RETURN_CODE 77)
  endforeach()
  # Each begins "# expect: REGEX", what the refusal must say.
  file(GLOB refused ${DRT_SCENARIO_DIR}/refused/*.scn)
  foreach(scenario IN LISTS refused)
    get_filename_component(scenario_name ${scenario} NAME_WE)
    file(STRINGS ${scenario} expect LIMIT_COUNT 1 REGEX "^# expect: ")
    string(REGEX REPLACE "^# expect: " "" expect "${expect}")
    add_test(NAME ${name}.refused.${scenario_name}
             COMMAND ${replay} ${scenario} ${load} --backend ${ARG_BACKEND}
                     ${parameters})
    set_tests_properties(${name}.refused.${scenario_name} PROPERTIES
      LABELS "${labels};scenario" PASS_REGULAR_EXPRESSION "${expect}")
  endforeach()

  if(NOT TARGET drt::behaviour_tests)
    message(STATUS "drt_add_conformance_tests(${name}): this drt was built "
                   "without tests, so without the Behaviour tests")
  elseif(type STREQUAL "MODULE_LIBRARY")
    add_test(NAME ${name}.behaviour
             COMMAND ${behaviour} ${load} --backend ${ARG_BACKEND}
                     ${parameters})
    set_tests_properties(${name}.behaviour PROPERTIES
                         LABELS "${labels};behaviour")
  else()
    include(GoogleTest)
    gtest_discover_tests(${name}-behaviour
      TEST_PREFIX ${name}.behaviour.
      PROPERTIES LABELS "${labels};behaviour")
  endif()
endfunction()
