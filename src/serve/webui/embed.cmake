# Writes OUT, a C++ source that holds every .html, .js and .css file of DIR as a byte array, for web_files()
# (include/plainllama/serve/webui.h). Run by the build (cmake -P) whenever one of the files changes.
#   cmake -DDIR=src/serve/webui -DOUT=build/generated/webui_files.cpp -P src/serve/webui/embed.cmake
file(GLOB names RELATIVE ${DIR} ${DIR}/*.html ${DIR}/*.js ${DIR}/*.css)
list(SORT names)
list(REMOVE_ITEM names index.html)
list(PREPEND names index.html)  # index.html first
set(arrays "")
set(entries "")
set(i 0)
foreach(name ${names})
  file(READ ${DIR}/${name} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" bytes "${bytes}")
  if(name MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(name MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  else()
    set(type "text/css; charset=utf-8")
  endif()
  string(APPEND arrays "const unsigned char webui_file${i}[] = {\n${bytes}};\n")
  string(APPEND entries "        {\"${name}\", \"${type}\", webui_text(webui_file${i}, sizeof webui_file${i})},\n")
  math(EXPR i "${i} + 1")
endforeach()
set(text "// Generated from src/serve/webui/ by src/serve/webui/embed.cmake: do not edit.
#include \"plainllama/serve/webui.h\"

namespace plainllama {
namespace {
std::string_view webui_text(const unsigned char* p, size_t n) { return {reinterpret_cast<const char*>(p), n}; }
${arrays}}  // namespace

const std::vector<WebFile>& web_files() {
    static const std::vector<WebFile> files = {
${entries}    };
    return files;
}

}  // namespace plainllama
")
file(WRITE ${OUT} "${text}")
