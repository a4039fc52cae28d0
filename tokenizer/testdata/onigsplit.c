// onigsplit reads UTF-8 strings from stdin, each preceded by its length as a
// 4-byte little-endian integer, and, for each,
// prints the end offsets of the split regex matches found by Oniguruma (the
// engine HF tokenizers uses), space separated, one line per string. The
// regex is Llama-3's, or argv[1]'s: "qwen2" or "gpt2". Used by
// TestSplitMatchesOniguruma; build with -lonig.
#include <oniguruma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *llama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *qwen2 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *gpt2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int main(int argc, char **argv) {
  const char *pattern = llama3;
  if (argc > 1 && strcmp(argv[1], "qwen2") == 0) pattern = qwen2;
  if (argc > 1 && strcmp(argv[1], "gpt2") == 0) pattern = gpt2;
  OnigEncoding encs[] = {ONIG_ENCODING_UTF8};
  onig_initialize(encs, 1);
  regex_t *reg;
  OnigErrorInfo einfo;
  const UChar *p = (const UChar *)pattern;
  if (onig_new(&reg, p, p + strlen(pattern), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
               ONIG_SYNTAX_DEFAULT, &einfo) != ONIG_NORMAL) {
    fprintf(stderr, "onig_new failed\n");
    return 1;
  }
  OnigRegion *region = onig_region_new();
  unsigned char hdr[4];
  while (fread(hdr, 1, 4, stdin) == 4) {
    size_t n = hdr[0] | hdr[1] << 8 | hdr[2] << 16 | (size_t)hdr[3] << 24;
    char *buf = malloc(n + 1);
    if (fread(buf, 1, n, stdin) != n) return 1;
    const UChar *s = (const UChar *)buf, *end = s + n;
    size_t pos = 0;
    while (pos < n) {
      int r = onig_search(reg, s, end, s + pos, end, region, ONIG_OPTION_NONE);
      if (r < 0) {
        printf("nomatch@%zu ", pos);
        break;
      }
      if ((size_t)r != pos) printf("gap@%zu ", pos);
      size_t e = (size_t)region->end[0];
      if (e == (size_t)r) e++; // empty match: step over (never expected)
      printf("%zu ", e);
      pos = e;
    }
    printf("\n");
    free(buf);
  }
  return 0;
}
