# Writes OUT, a C file holding the bytes of IN as `const unsigned char NAME[]` (NUL
# added, not counted) and `const size_t NAME_len`: how the server carries its web page.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
get_filename_component(src "${IN}" NAME)
file(WRITE "${OUT}" "/* ${src}, made into C by cmake/embed.cmake at build time */\n#include <stddef.h>\n"
     "const unsigned char ${NAME}[] = {${bytes}0};\nconst size_t ${NAME}_len = ${len};\n")
