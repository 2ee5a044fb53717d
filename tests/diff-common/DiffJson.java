// What both differential harnesses (tests/feel-diff/FeelDiff.java, tests/dmn-diff/DmnDiff.java)
// share: the JSON of the variable Zeebe 8.5 writes from a FEEL value (`zeebe`), JSON strings and
// numbers as both print them, and a minimal JSON reader and writer for their inputs. Compiled
// beside each harness by its regenerate.sh.
import java.math.BigDecimal;
import java.util.*;
import org.camunda.feel.syntaxtree.*;

final class DiffJson {
  private DiffJson() {}

  /** Reads one JSON value (an object, array, string, number or literal). */
  static Object parse(String s) {
    return new Json(s).value();
  }

  /**
   * The JSON of the variable Zeebe 8.5 writes from a FEEL value (its
   * FeelToMessagePackTransformer, printed as JSON). Zeebe converts through Java's types: a whole
   * number is `BigDecimal.longValue()` (wrapping beyond 64 bits), another number `doubleValue()`;
   * temporal values are the `toString()` of their java.time objects and a zoned time
   * feel-scala's `ZonedTime.format`; a context is its variables; functions, ranges and errors
   * are null.
   */
  static String zeebe(Object o) {
    if (o == null || o instanceof ValNull$) return "null";
    if (o instanceof ValBoolean) return String.valueOf(((ValBoolean) o).value());
    if (o instanceof ValNumber) {
      scala.math.BigDecimal n = ((ValNumber) o).value();
      if (n.isWhole()) return String.valueOf(n.longValue());
      // BigDecimal.doubleValue() and Double.toString() are exact from JDK 19 on (Zeebe 8.5
      // runs on 21), not before: take the double with parseDouble and print the shortest
      // decimal that parses back to it, so that the harness gives the same double on any JDK
      double d = Double.parseDouble(n.bigDecimal().toString());
      return Double.isFinite(d) ? shortest(d) : "null";
    }
    if (o instanceof ValString) return quote(((ValString) o).value());
    if (o instanceof ValDate) return quote(((ValDate) o).value().toString());
    if (o instanceof ValLocalTime) return quote(((ValLocalTime) o).value().toString());
    if (o instanceof ValTime) return quote(((ValTime) o).value().format());
    if (o instanceof ValLocalDateTime) return quote(((ValLocalDateTime) o).value().toString());
    if (o instanceof ValDateTime) return quote(((ValDateTime) o).value().toString());
    if (o instanceof ValDayTimeDuration) return quote(((ValDayTimeDuration) o).value().toString());
    if (o instanceof ValYearMonthDuration) return quote(((ValYearMonthDuration) o).value().toString());
    if (o instanceof ValList) {
      StringBuilder sb = new StringBuilder("[");
      scala.collection.Iterator<Val> it = ((ValList) o).items().iterator();
      while (it.hasNext()) {
        sb.append(zeebe(it.next()));
        if (it.hasNext()) sb.append(",");
      }
      return sb.append("]").toString();
    }
    if (o instanceof ValContext) {
      scala.collection.Iterator<scala.Tuple2<String, Object>> it =
          ((ValContext) o).context().variableProvider().getVariables().iterator();
      StringBuilder sb = new StringBuilder("{");
      while (it.hasNext()) {
        scala.Tuple2<String, Object> e = it.next();
        sb.append(quote(e._1())).append(":").append(e._2() instanceof Val ? zeebe(e._2()) : "null");
        if (it.hasNext()) sb.append(",");
      }
      return sb.append("}").toString();
    }
    return "null";
  }

  /** The shortest decimal that parses back to {@code d}, always with a point or exponent. */
  static String shortest(double d) {
    if (!Double.isFinite(d)) return "null";
    BigDecimal exact = new BigDecimal(d);
    String s = exact.toString();
    for (int digits = 1; digits <= 17; digits++) {
      String t = exact.round(new java.math.MathContext(digits)).toString();
      if (Double.parseDouble(t) == d) {
        s = t;
        break;
      }
    }
    return s.contains(".") || s.contains("E") ? s : s + ".0";
  }

  /** {@code s} as a JSON string; null as JSON's null. */
  static String quote(String s) {
    if (s == null) return "null";
    StringBuilder sb = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
          else sb.append(c);
      }
    }
    return sb.append("\"").toString();
  }

  /** A minimal JSON reader and writer (the cases and @ctx lines): objects, arrays, strings, numbers, literals. */
  static final class Json {
    final String s;
    int i;

    Json(String s) {
      this.s = s;
    }

    static String write(Object o) {
      if (o == null) return "null";
      if (o instanceof String) return quote((String) o);
      if (o instanceof Double) return shortest((Double) o);
      if (o instanceof Map) {
        StringBuilder sb = new StringBuilder("{");
        boolean first = true;
        for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
          if (!first) sb.append(",");
          first = false;
          sb.append(quote((String) e.getKey())).append(":").append(write(e.getValue()));
        }
        return sb.append("}").toString();
      }
      if (o instanceof List) {
        StringBuilder sb = new StringBuilder("[");
        boolean first = true;
        for (Object x : (List<?>) o) {
          if (!first) sb.append(",");
          first = false;
          sb.append(write(x));
        }
        return sb.append("]").toString();
      }
      return o.toString();
    }

    Object value() {
      ws();
      char c = s.charAt(i);
      if (c == '{') {
        i++;
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (s.charAt(i) == '}') {
          i++;
          return m;
        }
        while (true) {
          ws();
          String k = (String) value();
          ws();
          i++; // ':'
          m.put(k, value());
          ws();
          if (s.charAt(i++) == '}') return m;
        }
      }
      if (c == '[') {
        i++;
        List<Object> l = new ArrayList<>();
        ws();
        if (s.charAt(i) == ']') {
          i++;
          return l;
        }
        while (true) {
          l.add(value());
          ws();
          if (s.charAt(i++) == ']') return l;
        }
      }
      if (c == '"') {
        i++;
        StringBuilder sb = new StringBuilder();
        while (s.charAt(i) != '"') {
          char x = s.charAt(i++);
          if (x == '\\') {
            char e = s.charAt(i++);
            switch (e) {
              case 'n': sb.append('\n'); break;
              case 't': sb.append('\t'); break;
              case 'r': sb.append('\r'); break;
              case 'u': sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
              default: sb.append(e);
            }
          } else sb.append(x);
        }
        i++;
        return sb.toString();
      }
      if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
      if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
      if (s.startsWith("null", i)) { i += 4; return null; }
      int start = i;
      while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
      String num = s.substring(start, i);
      if (num.matches("-?\\d+")) {
        try {
          return Long.parseLong(num);
        } catch (NumberFormatException e) {
          return new BigDecimal(num);
        }
      }
      return Double.parseDouble(num);
    }

    void ws() {
      while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
    }
  }
}
