# cmake -DSRC=in.py -DDST=out -DSHEBANG=/usr/bin/python3 -P write_script.cmake
# Writes SRC to DST, executable, with its first line "#!${SHEBANG}".
file(READ "${SRC}" text)
string(REGEX REPLACE "^#![^\n]*" "#!${SHEBANG}" text "${text}")
file(WRITE "${DST}.tmp" "${text}")
file(CHMOD "${DST}.tmp" PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
     GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(RENAME "${DST}.tmp" "${DST}")
