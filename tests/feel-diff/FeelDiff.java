// Differential harness: evaluates the FEEL corpus with the real feel-scala engine (1.17.8, the
// version Zeebe 8.5.8 ships) and prints one JSON line per entry with the result in canonical form.
//
//   java -cp "$HOME/.cache/waggle-peers/feel-scala/lib/*" FeelDiff.java corpus/ > expected.jsonl
//
// Corpus files (*.txt, read in name order): one expression per line. `#` starts a comment line.
// Directives change how the following lines of the same file are evaluated:
//   @ctx {json}     variables for the following lines (JSON object; `@ctx` alone clears them)
//   @input <feel>   following lines are unary tests, applied to the value of this expression
//   @expr           following lines are plain expressions again (ends @input)
// A line starting with `~ ` is compared by type only (now(), random number(), uuid(), ...).
//
// Canonical form (the same one crates/feel/tests/differential.rs produces): `null`, `true`,
// numbers as plain decimals without trailing zeros, strings JSON-quoted, `date(..)`,
// `time(..)`, `datetime(..)` with ISO text (seconds always, fraction only if not zero, offset
// `Z`/`+01:00`, region zone id in brackets), `ym(<months>)`, `dt(<seconds>)`, lists `[a, b]`,
// contexts `{"k": v}` with keys sorted, ranges `range([a..b))`, `function`.
//
// Each successful entry also gets `zeebe`: the JSON of the variable Zeebe 8.5 writes from the
// result (its FeelToMessagePackTransformer, printed as JSON). Zeebe converts through Java's
// types: a whole number is `BigDecimal.longValue()` (wrapping beyond 64 bits), another number
// `doubleValue()`; temporal values are the `toString()` of their java.time objects (LocalTime
// `10:30`, Duration `PT24H`, Period `P-4Y-4M`, ZonedDateTime `...+01:00[Europe/Berlin]`) and a
// zoned time feel-scala's `ZonedTime.format`; a context is its variables (functions defined in
// a context literal are not among them); functions, ranges and errors are null.
import java.io.*;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.*;
import java.time.*;
import java.util.*;
import org.camunda.feel.api.*;
import org.camunda.feel.syntaxtree.*;
import org.camunda.feel.valuemapper.CustomValueMapper;

public class FeelDiff {

  /** Hands results back as feel-scala's own values (Val) so that nothing is lost on the way. */
  static final class IdentityMapper implements CustomValueMapper {
    public void org$camunda$feel$valuemapper$CustomValueMapper$_setter_$priority_$eq(int p) {}

    public scala.Option<Val> toVal(Object x, scala.Function1<Object, Val> inner) {
      if (x instanceof Val) return scala.Option.apply((Val) x);
      return scala.Option.empty();
    }

    public scala.Option<Object> unpackVal(Val v, scala.Function1<Val, Object> inner) {
      return scala.Option.apply(v);
    }

    public int priority() {
      return 1000;
    }
  }

  public static void main(String[] args) throws Exception {
    Path dir = Paths.get(args[0]);
    FeelEngineApi engine = FeelEngineBuilder.apply(
            FeelEngineBuilder.apply$default$1(),
            FeelEngineBuilder.apply$default$2(),
            FeelEngineBuilder.apply$default$3(),
            FeelEngineBuilder.apply$default$4(),
            FeelEngineBuilder.apply$default$5())
        .withCustomValueMapper(new IdentityMapper())
        .build();
    List<Path> files = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*.txt")) {
      for (Path p : ds) files.add(p);
    }
    Collections.sort(files);
    PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
    Set<String> ids = new HashSet<>();
    for (Path file : files) {
      String stem = file.getFileName().toString().replaceAll("\\.txt$", "");
      String ctxJson = null;
      String input = null;
      for (String line : Files.readAllLines(file, StandardCharsets.UTF_8)) {
        if (line.isBlank() || line.startsWith("#")) continue;
        if (line.startsWith("@ctx")) {
          ctxJson = line.substring(4).trim();
          if (ctxJson.isEmpty()) ctxJson = null;
          continue;
        }
        if (line.startsWith("@input")) {
          input = line.substring(6).trim();
          continue;
        }
        if (line.startsWith("@expr")) {
          input = null;
          continue;
        }
        boolean shape = line.startsWith("~ ");
        String expr = shape ? line.substring(2) : line;
        String id = stem + ": " + expr;
        if (input != null) id = stem + ": " + input + " ~ " + expr;
        if (ctxJson != null) id = id + " | " + ctxJson;
        for (int n = 2; ids.contains(id); n++) id = id.replaceAll(" #\\d+$", "") + " #" + n;
        ids.add(id);
        Map<String, Object> vars = ctxJson == null ? new HashMap<>() : asMap(new Json(ctxJson).value());
        boolean ok;
        String canon;
        String zeebeJson = null;
        try {
          EvaluationResult r;
          if (input != null) {
            EvaluationResult in = engine.evaluateExpression(input, vars);
            Object inVal = in.isSuccess() ? in.result() : ValNull$.MODULE$;
            r = engine.evaluateUnaryTests(expr, inVal, vars);
          } else {
            r = engine.evaluateExpression(expr, vars);
          }
          ok = r.isSuccess();
          canon = ok ? canonical(r.result()) : null;
          if (ok) zeebeJson = zeebe(r.result());
        } catch (Throwable t) {
          ok = false;
          canon = null;
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"id\":").append(quote(id));
        sb.append(",\"expr\":").append(quote(expr));
        if (ctxJson != null) sb.append(",\"ctx\":").append(quote(ctxJson));
        if (input != null) sb.append(",\"input\":").append(quote(input));
        if (shape) sb.append(",\"shape\":true");
        sb.append(",\"ok\":").append(ok);
        sb.append(",\"value\":").append(canon == null ? "null" : quote(canon));
        if (ok) sb.append(",\"zeebe\":").append(zeebeJson);
        sb.append("}");
        out.println(sb);
      }
    }
  }

  @SuppressWarnings("unchecked")
  static Map<String, Object> asMap(Object o) {
    return o instanceof Map ? (Map<String, Object>) o : new HashMap<>();
  }

  static String canonical(Object o) {
    if (o == null || o instanceof ValNull$) return "null";
    if (o instanceof ValBoolean) return String.valueOf(((ValBoolean) o).value());
    if (o instanceof ValNumber) return number(((ValNumber) o).value().bigDecimal());
    if (o instanceof ValString) return quote(((ValString) o).value());
    if (o instanceof ValDate) return "date(" + ((ValDate) o).value() + ")";
    if (o instanceof ValLocalTime) return "time(" + time(((ValLocalTime) o).value()) + ")";
    if (o instanceof ValTime) {
      ZonedTime t = ((ValTime) o).value();
      String s = time(t.time()) + offset(t.offset());
      if (t.zone().isDefined() && !(t.zone().get() instanceof ZoneOffset)) s += "[" + t.zone().get().getId() + "]";
      return "time(" + s + ")";
    }
    if (o instanceof ValLocalDateTime) {
      LocalDateTime d = ((ValLocalDateTime) o).value();
      return "datetime(" + d.toLocalDate() + "T" + time(d.toLocalTime()) + ")";
    }
    if (o instanceof ValDateTime) {
      ZonedDateTime d = ((ValDateTime) o).value();
      String s = d.toLocalDate() + "T" + time(d.toLocalTime()) + offset(d.getOffset());
      if (!(d.getZone() instanceof ZoneOffset)) s += "[" + d.getZone().getId() + "]";
      return "datetime(" + s + ")";
    }
    if (o instanceof ValYearMonthDuration) return "ym(" + ((ValYearMonthDuration) o).value().toTotalMonths() + ")";
    if (o instanceof ValDayTimeDuration) {
      Duration d = ((ValDayTimeDuration) o).value();
      return "dt(" + number(BigDecimal.valueOf(d.getSeconds()).add(BigDecimal.valueOf(d.getNano(), 9))) + ")";
    }
    if (o instanceof ValList) {
      StringBuilder sb = new StringBuilder("[");
      scala.collection.Iterator<Val> it = ((ValList) o).items().iterator();
      boolean first = true;
      while (it.hasNext()) {
        if (!first) sb.append(", ");
        first = false;
        sb.append(canonical(it.next()));
      }
      return sb.append("]").toString();
    }
    if (o instanceof ValContext) {
      scala.collection.immutable.Map<String, Object> vars = ((ValContext) o).context().variableProvider().getVariables();
      TreeMap<String, String> sorted = new TreeMap<>();
      scala.collection.Iterator<scala.Tuple2<String, Object>> it = vars.iterator();
      while (it.hasNext()) {
        scala.Tuple2<String, Object> e = it.next();
        sorted.put(e._1(), canonical(e._2()));
      }
      StringBuilder sb = new StringBuilder("{");
      boolean first = true;
      for (Map.Entry<String, String> e : sorted.entrySet()) {
        if (!first) sb.append(", ");
        first = false;
        sb.append(quote(e.getKey())).append(": ").append(e.getValue());
      }
      return sb.append("}").toString();
    }
    if (o instanceof ValRange) {
      ValRange r = (ValRange) o;
      return "range(" + boundary(r.start(), true) + ".." + boundary(r.end(), false) + ")";
    }
    if (o instanceof ValFunction) return "function";
    if (o instanceof ValError) return "error";
    // raw Java values inside contexts built from variables
    if (o instanceof BigDecimal) return number((BigDecimal) o);
    if (o instanceof Long || o instanceof Integer) return String.valueOf(o);
    if (o instanceof String) return quote((String) o);
    if (o instanceof Boolean) return o.toString();
    return "raw(" + o.getClass().getSimpleName() + ":" + o + ")";
  }

  /** The JSON of the variable Zeebe 8.5 writes from a FEEL result (see the header). */
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

  static String boundary(RangeBoundary b, boolean start) {
    boolean closed = b instanceof ClosedRangeBoundary;
    String v = canonical(closed ? ((ClosedRangeBoundary) b).value() : ((OpenRangeBoundary) b).value());
    if (start) return (closed ? "[" : "(") + v;
    return v + (closed ? "]" : ")");
  }

  static String number(BigDecimal d) {
    if (d.signum() == 0) return "0";
    return d.stripTrailingZeros().toPlainString();
  }

  static String time(LocalTime t) {
    String s = String.format("%02d:%02d:%02d", t.getHour(), t.getMinute(), t.getSecond());
    if (t.getNano() != 0) s += String.format(".%09d", t.getNano()).replaceAll("0+$", "");
    return s;
  }

  static String offset(ZoneOffset o) {
    return o.getTotalSeconds() == 0 ? "Z" : o.getId();
  }

  static String quote(String s) {
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

  /** A minimal JSON reader for the @ctx lines: objects, arrays, strings, numbers, literals. */
  static final class Json {
    final String s;
    int i;

    Json(String s) {
      this.s = s;
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
