// Splits a reply into text and fenced code blocks (```lang … ```), the one
// piece of Markdown the page renders: code keeps its spacing in a <pre>.
// An unclosed fence (a reply still streaming) is code up to the end.
export function segments(text) {
  const out = [];
  const fence = /^[ \t]*```([^\n`]*)\n?/m;
  let rest = text;
  while (rest.length > 0) {
    const open = fence.exec(rest);
    if (!open) {
      out.push({ kind: "text", text: rest });
      break;
    }
    if (open.index > 0) out.push({ kind: "text", text: rest.slice(0, open.index) });
    rest = rest.slice(open.index + open[0].length);
    const close = /^[ \t]*```[ \t]*$/m.exec(rest);
    const end = close ? close.index : rest.length;
    out.push({ kind: "code", lang: open[1].trim(), text: rest.slice(0, end).replace(/\n$/, "") });
    rest = close ? rest.slice(close.index + close[0].length).replace(/^\n/, "") : "";
  }
  return out;
}
