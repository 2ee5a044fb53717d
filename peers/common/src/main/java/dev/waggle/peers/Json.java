package dev.waggle.peers;

import java.util.LinkedHashMap;
import java.util.Map;

/** The little JSON the harness needs: a payload object's top-level entries, and writing text. */
final class Json {
    private Json() {}

    /**
     * The top-level entries of a JSON object as process variables: strings, numbers (Long or
     * Double), booleans and null as themselves; objects and arrays as their JSON text (both
     * engines store a long text in their byte-array table, as they would a serialised object).
     */
    static Map<String, Object> topLevel(String text) {
        Parser p = new Parser(text.trim());
        Map<String, Object> out = new LinkedHashMap<>();
        p.expect('{');
        p.ws();
        if (p.peek() == '}') {
            return out;
        }
        while (true) {
            p.ws();
            String key = p.string();
            p.ws();
            p.expect(':');
            p.ws();
            out.put(key, p.value());
            p.ws();
            char c = p.next();
            if (c == '}') {
                return out;
            }
            if (c != ',') {
                throw new IllegalArgumentException("payload: expected , or } at " + (p.i - 1));
            }
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    private static final class Parser {
        final String s;
        int i;

        Parser(String s) {
            this.s = s;
        }

        char peek() {
            if (i >= s.length()) {
                throw new IllegalArgumentException("payload: unexpected end");
            }
            return s.charAt(i);
        }

        char next() {
            char c = peek();
            i++;
            return c;
        }

        void ws() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        void expect(char c) {
            if (next() != c) {
                throw new IllegalArgumentException("payload: expected " + c + " at " + (i - 1));
            }
        }

        String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = next();
                if (c == '"') {
                    return b.toString();
                }
                if (c == '\\') {
                    char e = next();
                    switch (e) {
                        case 'n' -> b.append('\n');
                        case 't' -> b.append('\t');
                        case 'r' -> b.append('\r');
                        case 'b' -> b.append('\b');
                        case 'f' -> b.append('\f');
                        case 'u' -> {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            i += 4;
                        }
                        default -> b.append(e);
                    }
                } else {
                    b.append(c);
                }
            }
        }

        Object value() {
            char c = peek();
            if (c == '"') {
                return string();
            }
            if (c == '{' || c == '[') {
                int start = i;
                skipNested();
                return s.substring(start, i);
            }
            int start = i;
            while (i < s.length() && ",}] \n\r\t".indexOf(s.charAt(i)) < 0) {
                i++;
            }
            String word = s.substring(start, i);
            switch (word) {
                case "true":
                    return Boolean.TRUE;
                case "false":
                    return Boolean.FALSE;
                case "null":
                    return null;
                default:
                    if (word.matches("-?\\d+")) {
                        return Long.parseLong(word);
                    }
                    return Double.parseDouble(word);
            }
        }

        void skipNested() {
            int depth = 0;
            do {
                char c = next();
                if (c == '"') {
                    i--;
                    string();
                } else if (c == '{' || c == '[') {
                    depth++;
                } else if (c == '}' || c == ']') {
                    depth--;
                }
            } while (depth > 0);
        }
    }
}
