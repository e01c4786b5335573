# Copies the framework sources and headers to DST and applies PATCH there. A
# patch that no longer applies does not break the build: the unpatched copy
# is built and DST/PATCH_FAILED records why, so that only this mutant's test
# fails.
#   cmake -DSRC=<framework dir> -DDST=<dir> -DPATCH=<file> -P ApplyMutant.cmake
file(REMOVE_RECURSE ${DST}/src ${DST}/include)
file(COPY ${SRC}/src ${SRC}/include DESTINATION ${DST})
file(REMOVE ${DST}/PATCH_FAILED)
find_program(PATCH_PROGRAM patch REQUIRED)
execute_process(
  COMMAND ${PATCH_PROGRAM} -p1 --batch --forward --no-backup-if-mismatch
          -d ${DST} -i ${PATCH}
  RESULT_VARIABLE result
  OUTPUT_VARIABLE output
  ERROR_VARIABLE output)
if(NOT result EQUAL 0)
  file(REMOVE_RECURSE ${DST}/src ${DST}/include)
  file(COPY ${SRC}/src ${SRC}/include DESTINATION ${DST})
  file(WRITE ${DST}/PATCH_FAILED "${PATCH} does not apply:\n${output}")
  message(WARNING "mutant patch ${PATCH} does not apply; its test will fail")
endif()
file(TOUCH ${DST}/applied.stamp)
