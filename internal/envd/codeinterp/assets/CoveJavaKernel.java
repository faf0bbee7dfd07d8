// Cove's Java kernel for the code interpreter: JShell (the JDK's own REPL
// engine) run in this JVM, so declarations, imports and values are kept
// between executions. It reads Jupyter requests as JSON lines on
// descriptor 3 and writes Jupyter messages as JSON lines on descriptor 4;
// System.out and System.err of the code are the execution's output.
import java.io.*;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.*;
import jdk.jshell.*;
import jdk.jshell.SourceCodeAnalysis.Completeness;

public class CoveJavaKernel {
    static final PrintStream messages;
    static volatile String current = null;
    static int count = 0;
    static JShell shell;

    static {
        try {
            messages = new PrintStream(new FileOutputStream("/proc/self/fd/4"), true, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        System.setOut(output("stdout"));
        System.setErr(output("stderr"));
        shell = JShell.builder().executionEngine("local").build();
        sun.misc.Signal.handle(new sun.misc.Signal("INT"), sig -> shell.stop());
        BufferedReader in = new BufferedReader(new InputStreamReader(new FileInputStream("/proc/self/fd/3"), StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            @SuppressWarnings("unchecked")
            Map<String, Object> msg = (Map<String, Object>) new Json(line).value();
            @SuppressWarnings("unchecked")
            Map<String, Object> hdr = (Map<String, Object>) msg.get("header");
            @SuppressWarnings("unchecked")
            Map<String, Object> content = (Map<String, Object>) msg.get("content");
            String id = (String) hdr.get("msg_id");
            send("status", id, Map.of("execution_state", "busy"));
            switch ((String) hdr.get("msg_type")) {
                case "execute_request" -> execute(id, (String) content.get("code"), Boolean.TRUE.equals(content.get("silent")));
                case "kernel_info_request" -> send("kernel_info_reply", id, Map.of("status", "ok", "protocol_version", "5.3",
                        "implementation", "cove-java", "language_info", Map.of("name", "java", "version", System.getProperty("java.version"))));
                case "cove_env_request" -> {
                    setEnv(content);
                    send("cove_env_reply", id, Map.of("status", "ok"));
                }
                default -> { }
            }
            send("status", id, Map.of("execution_state", "idle"));
        }
        System.exit(0);
    }

    static PrintStream output(String name) {
        OutputStream os = new OutputStream() {
            @Override public void write(int b) { write(new byte[] {(byte) b}, 0, 1); }
            @Override public void write(byte[] b, int off, int len) {
                String id = current;
                if (id != null && len > 0) send("stream", id, Map.of("name", name, "text", new String(b, off, len, StandardCharsets.UTF_8)));
            }
        };
        return new PrintStream(new BufferedOutputStream(os, 8192), true, StandardCharsets.UTF_8);
    }

    static void execute(String id, String code, boolean silent) {
        if (!silent) count++;
        current = silent ? null : id;
        Map<String, Object> error = null;
        String value = null;
        try {
            String remaining = code;
            while (error == null && !remaining.isBlank()) {
                SourceCodeAnalysis.CompletionInfo info = shell.sourceCodeAnalysis().analyzeCompletion(remaining);
                if (info.completeness() == Completeness.EMPTY) break;
                String source;
                if (info.completeness().isComplete()) {
                    source = info.source();
                    remaining = info.remaining();
                } else {
                    source = remaining;
                    remaining = "";
                }
                value = null;
                for (SnippetEvent ev : shell.eval(source)) {
                    if (ev.causeSnippet() != null) continue;
                    if (ev.exception() != null) {
                        error = exception(ev.exception());
                        break;
                    }
                    if (ev.status() == Snippet.Status.REJECTED) {
                        StringBuilder sb = new StringBuilder();
                        shell.diagnostics(ev.snippet()).forEach(d -> sb.append(d.getMessage(Locale.ROOT)).append('\n'));
                        String text = sb.toString().trim();
                        error = errorContent("CompilationException", text.isEmpty() ? "the code does not compile" : text, text);
                        break;
                    }
                    Snippet sn = ev.snippet();
                    boolean expression = sn.kind() == Snippet.Kind.EXPRESSION
                            || (sn.kind() == Snippet.Kind.VAR && sn.subKind() == Snippet.SubKind.TEMP_VAR_EXPRESSION_SUBKIND);
                    if (expression && ev.value() != null) value = ev.value();
                }
            }
        } catch (RuntimeException e) {
            error = errorContent(e.getClass().getSimpleName(), String.valueOf(e.getMessage()), stackTrace(e));
        }
        System.out.flush();
        System.err.flush();
        current = null;
        Map<String, Object> reply = new LinkedHashMap<>();
        reply.put("execution_count", count);
        if (error != null) {
            if (!silent) send("error", id, error);
            reply.put("status", "error");
            reply.putAll(error);
        } else {
            if (!silent && value != null) {
                send("execute_result", id, Map.of("execution_count", count, "data", Map.of("text/plain", value), "metadata", Map.of()));
            }
            reply.put("status", "ok");
        }
        send("execute_reply", id, reply);
    }

    static Map<String, Object> exception(JShellException e) {
        String name = e instanceof EvalException ee ? ee.getExceptionClassName() : e.getClass().getSimpleName();
        if (e instanceof UnresolvedReferenceException) name = "UnresolvedReferenceException";
        String simple = name.substring(name.lastIndexOf('.') + 1);
        return errorContent(simple, String.valueOf(e.getMessage()), name + ": " + e.getMessage() + "\n" + stackTrace(e));
    }

    static String stackTrace(Throwable e) {
        StringBuilder sb = new StringBuilder();
        for (StackTraceElement el : e.getStackTrace()) sb.append("\tat ").append(el).append('\n');
        return sb.toString();
    }

    static Map<String, Object> errorContent(String name, String value, String traceback) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("ename", name);
        m.put("evalue", value);
        m.put("traceback", List.of(traceback));
        return m;
    }

    // setEnv sets system properties and, through the JDK's own map behind
    // System.getenv, the environment the code reads.
    @SuppressWarnings("unchecked")
    static void setEnv(Map<String, Object> content) {
        Map<String, Object> set = (Map<String, Object>) content.getOrDefault("set", Map.of());
        List<Object> unset = (List<Object>) content.getOrDefault("unset", List.of());
        Map<String, String> env = null;
        try {
            Map<String, String> view = System.getenv();
            Field f = view.getClass().getDeclaredField("m");
            f.setAccessible(true);
            env = (Map<String, String>) f.get(view);
        } catch (ReflectiveOperationException | RuntimeException e) {
            System.err.println("cove: the environment cannot change in this JVM: " + e);
        }
        for (Map.Entry<String, Object> e : set.entrySet()) {
            System.setProperty(e.getKey(), (String) e.getValue());
            if (env != null) env.put(e.getKey(), (String) e.getValue());
        }
        for (Object k : unset) {
            System.clearProperty((String) k);
            if (env != null) env.remove(k);
        }
    }

    static synchronized void send(String type, String parent, Map<String, Object> content) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("header", Map.of("msg_id", UUID.randomUUID().toString(), "msg_type", type, "version", "5.3"));
        m.put("parent_header", Map.of("msg_id", parent));
        m.put("metadata", Map.of());
        m.put("content", content);
        messages.println(Json.write(m));
    }

    // Json is the little JSON this kernel needs: objects, arrays, strings,
    // numbers, booleans and null.
    static final class Json {
        private final String s;
        private int i;

        Json(String s) { this.s = s; }

        Object value() {
            skip();
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    i++;
                    Map<String, Object> m = new LinkedHashMap<>();
                    skip();
                    if (s.charAt(i) == '}') { i++; return m; }
                    while (true) {
                        skip();
                        String k = string();
                        skip();
                        i++; // ':'
                        m.put(k, value());
                        skip();
                        if (s.charAt(i++) == '}') return m;
                    }
                }
                case '[': {
                    i++;
                    List<Object> l = new ArrayList<>();
                    skip();
                    if (s.charAt(i) == ']') { i++; return l; }
                    while (true) {
                        l.add(value());
                        skip();
                        if (s.charAt(i++) == ']') return l;
                    }
                }
                case '"': return string();
                case 't': i += 4; return Boolean.TRUE;
                case 'f': i += 5; return Boolean.FALSE;
                case 'n': i += 4; return null;
                default: {
                    int start = i;
                    while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
                    return Double.parseDouble(s.substring(start, i));
                }
            }
        }

        private void skip() { while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++; }

        private String string() {
            StringBuilder sb = new StringBuilder();
            i++; // '"'
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return sb.toString();
                if (c != '\\') { sb.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> sb.append('\n');
                    case 't' -> sb.append('\t');
                    case 'r' -> sb.append('\r');
                    case 'b' -> sb.append('\b');
                    case 'f' -> sb.append('\f');
                    case 'u' -> { sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; }
                    default -> sb.append(e);
                }
            }
        }

        static String write(Object v) {
            if (v == null) return "null";
            if (v instanceof String str) return quote(str);
            if (v instanceof Number || v instanceof Boolean) return v.toString();
            StringBuilder sb = new StringBuilder();
            if (v instanceof Map<?, ?> m) {
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) sb.append(',');
                    first = false;
                    sb.append(quote(String.valueOf(e.getKey()))).append(':').append(write(e.getValue()));
                }
                return sb.append('}').toString();
            }
            if (v instanceof Collection<?> c) {
                sb.append('[');
                boolean first = true;
                for (Object o : c) {
                    if (!first) sb.append(',');
                    first = false;
                    sb.append(write(o));
                }
                return sb.append(']').toString();
            }
            return quote(v.toString());
        }

        static String quote(String str) {
            StringBuilder sb = new StringBuilder("\"");
            for (char c : str.toCharArray()) {
                switch (c) {
                    case '"' -> sb.append("\\\"");
                    case '\\' -> sb.append("\\\\");
                    case '\n' -> sb.append("\\n");
                    case '\r' -> sb.append("\\r");
                    case '\t' -> sb.append("\\t");
                    default -> {
                        if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                        else sb.append(c);
                    }
                }
            }
            return sb.append('"').toString();
        }
    }
}
