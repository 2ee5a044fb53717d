// Differential harness: evaluates the FEEL corpus with the real feel-scala engine (1.17.8, the
// version Zeebe 8.5.8 ships) and prints one JSON line per entry with the result in canonical form.
//
//   regenerate.sh (compiles it with tests/diff-common/DiffJson.java, then runs it on corpus/)
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
        Map<String, Object> vars = ctxJson == null ? new HashMap<>() : asMap(DiffJson.parse(ctxJson));
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
          if (ok) zeebeJson = DiffJson.zeebe(r.result());
        } catch (Throwable t) {
          ok = false;
          canon = null;
        }
        StringBuilder sb = new StringBuilder();
        sb.append("{\"id\":").append(DiffJson.quote(id));
        sb.append(",\"expr\":").append(DiffJson.quote(expr));
        if (ctxJson != null) sb.append(",\"ctx\":").append(DiffJson.quote(ctxJson));
        if (input != null) sb.append(",\"input\":").append(DiffJson.quote(input));
        if (shape) sb.append(",\"shape\":true");
        sb.append(",\"ok\":").append(ok);
        sb.append(",\"value\":").append(canon == null ? "null" : DiffJson.quote(canon));
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
    if (o instanceof ValString) return DiffJson.quote(((ValString) o).value());
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
        sb.append(DiffJson.quote(e.getKey())).append(": ").append(e.getValue());
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
    if (o instanceof String) return DiffJson.quote((String) o);
    if (o instanceof Boolean) return o.toString();
    return "raw(" + o.getClass().getSimpleName() + ":" + o + ")";
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
}
