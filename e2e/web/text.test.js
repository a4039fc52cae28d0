// Unit test of the page's code-block splitter (webui/assets/text.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { segments } from "../../webui/assets/text.js";

const T = (text) => ({ kind: "text", text });
const C = (lang, text) => ({ kind: "code", lang, text });

test("segments", () => {
  const cases = [
    ["plain text", "Hello\nworld", [T("Hello\nworld")]],
    ["empty", "", []],
    ["a fenced block", "Run:\n```sh\nmake  all\n```\nDone.", [T("Run:\n"), C("sh", "make  all"), T("Done.")]],
    ["no language", "```\nx = 1\n```", [C("", "x = 1")]],
    ["indented fence", "  ```go\nfunc f() {}\n  ```\n", [C("go", "func f() {}")]],
    ["two blocks", "```a\n1\n```\nand\n```b\n2\n```", [C("a", "1"), T("and\n"), C("b", "2")]],
    ["unclosed while streaming", "See:\n```py\nprint(1)\n", [T("See:\n"), C("py", "print(1)")]],
    ["fence just opened", "See:\n```", [T("See:\n"), C("", "")]],
    ["inline backticks stay text", "use `x` and ``y``", [T("use `x` and ``y``")]],
    ["html stays text", "<b>hi</b>", [T("<b>hi</b>")]],
  ];
  for (const [name, input, want] of cases) {
    assert.deepEqual(segments(input), want, name);
  }
});
