// Minimal multipart/form-data parser (whole body in memory; test double).
export function boundaryOf(contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType || '');
  return m ? (m[1] || m[2]).trim() : null;
}

function decodeFilename(s) {
  // WHATWG FormData escapes " as %22 and CR/LF as %0D/%0A in filenames.
  return s.replace(/%22/g, '"').replace(/%0D/gi, '\r').replace(/%0A/gi, '\n');
}

export function parseMultipart(buf, boundary) {
  const delim = Buffer.from('--' + boundary);
  const parts = [];
  let pos = buf.indexOf(delim);
  if (pos < 0) throw new Error('multipart boundary not found');
  for (;;) {
    pos += delim.length;
    if (buf.subarray(pos, pos + 2).toString() === '--') break; // closing delimiter
    if (buf.subarray(pos, pos + 2).toString() === '\r\n') pos += 2;
    const headEnd = buf.indexOf('\r\n\r\n', pos);
    if (headEnd < 0) throw new Error('malformed multipart part headers');
    const headers = {};
    for (const line of buf.subarray(pos, headEnd).toString('utf8').split('\r\n')) {
      const i = line.indexOf(':');
      if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
    }
    const next = buf.indexOf(Buffer.concat([Buffer.from('\r\n'), delim]), headEnd + 4);
    if (next < 0) throw new Error('multipart closing boundary not found');
    const data = buf.subarray(headEnd + 4, next);
    const cd = headers['content-disposition'] || '';
    const name = /\bname="([^"]*)"/i.exec(cd);
    const filename = /\bfilename="([^"]*)"/i.exec(cd);
    parts.push({
      name: name ? name[1] : undefined,
      filename: filename ? decodeFilename(filename[1]) : undefined,
      headers,
      data,
    });
    pos = next + 2;
  }
  return parts;
}
