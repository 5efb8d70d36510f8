// Drives agentq's chat endpoint with the `ai` package's own client code (ai@6):
// DefaultChatTransport posts and parses, readUIMessageStream assembles the UIMessage,
// every chunk is checked against uiMessageChunkSchema. Exits 1 naming what failed.
// usage: node ai_sdk_chat.cjs BASE_URL AGENT CHAT_ID   (NODE_PATH = the node_modules with ai)
// With CHAT_TOKEN set, the transport sends it as the browser would (a per-chat token).
const ai = require("ai");

const [base, agent, chatId] = process.argv.slice(2);
const headers = process.env.CHAT_TOKEN ? { Authorization: `Bearer ${process.env.CHAT_TOKEN}` } : undefined;
const transport = new ai.DefaultChatTransport({ api: `${base}/v1/agents/${agent}/chat`, headers });
const chunkSchema = ai.uiMessageChunkSchema();
const seenChunks = [];

function fail(message, detail) {
  console.error(`ai-sdk-chat: ${message}` + (detail === undefined ? "" : `\n${JSON.stringify(detail, null, 2)}`));
  process.exit(1);
}

async function assemble(stream, message) {
  // Tee the chunk stream: one side is validated chunk by chunk, the other assembled.
  const [checked, assembled] = stream.tee();
  const checking = (async () => {
    const reader = checked.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      const result = await chunkSchema.validate(value);
      if (!result.success) fail(`chunk fails uiMessageChunkSchema: ${result.error}`, value);
      seenChunks.push(value.type);
    }
  })();
  let last;
  for await (const snapshot of ai.readUIMessageStream({
    message,
    stream: assembled,
    terminateOnError: true,
  })) {
    last = snapshot;
  }
  await checking;
  return structuredClone(last);
}

function send(messages) {
  return transport.sendMessages({
    chatId,
    messages,
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
}

function toolPart(message, name) {
  const part = message.parts.find((p) => p.type === `tool-${name}`);
  if (!part) fail(`no tool-${name} part`, message);
  return part;
}

(async () => {
  const user = { id: "u1", role: "user", parts: [{ type: "text", text: "add 1 and 2, then ask me" }] };

  // 1. A new run: text, a tool call that waits for approval; the response ends there.
  let assistant = await assemble(await send([user]));
  if (toolPart(assistant, "add").state !== "approval-requested") fail("add is not approval-requested", assistant);
  if (!assistant.parts.some((p) => p.type === "text" && p.text === "Adding."))
    fail("no 'Adding.' text part", assistant);
  // The step's reasoning is a reasoning part before the text, closed.
  const reasoning = assistant.parts.findIndex((p) => p.type === "reasoning");
  const text = assistant.parts.findIndex((p) => p.type === "text");
  if (reasoning < 0 || reasoning > text) fail("no reasoning part before the text", assistant);
  if (assistant.parts[reasoning].text !== "A sum: add asks for approval first." || assistant.parts[reasoning].state !== "done")
    fail("the reasoning part is not the step's reasoning, done", assistant);

  // 2. A reload mid-run: the resumed stream yields the same message.
  const resumed = await transport.reconnectToStream({ chatId });
  if (resumed === null) fail("nothing to resume while the run waits");
  const again = await assemble(resumed);
  if (JSON.stringify(again) !== JSON.stringify(assistant)) fail("resumed message differs", { assistant, again });

  // 3. The user approves (what addToolApprovalResponse does); useChat would send now.
  const add = toolPart(assistant, "add");
  add.state = "approval-responded";
  add.approval = { id: add.approval.id, approved: true };
  if (!ai.lastAssistantMessageIsCompleteWithApprovalResponses({ messages: [user, assistant] }))
    fail("the approval response would not be sent automatically", assistant);
  assistant = await assemble(await send([user, assistant]), assistant);
  if (toolPart(assistant, "add").state !== "output-available" || toolPart(assistant, "add").output !== 3)
    fail("add did not run after approval", assistant);
  if (toolPart(assistant, "fail").state !== "output-error") fail("fail is not output-error", assistant);
  const pick = toolPart(assistant, "pick_color");
  if (pick.state !== "input-available") fail("the client tool is not waiting for its output", assistant);

  // 4. The client-side tool's output (what addToolOutput does), sent back.
  pick.state = "output-available";
  pick.output = { color: "teal" };
  if (!ai.lastAssistantMessageIsCompleteWithToolCalls({ messages: [user, assistant] }))
    fail("the tool output would not be sent automatically", assistant);
  assistant = await assemble(await send([user, assistant]), assistant);
  const texts = assistant.parts.filter((p) => p.type === "text").map((p) => p.text);
  if (texts.at(-1) !== "All done: 3, teal.") fail("no final text", assistant);

  const valid = await ai.safeValidateUIMessages({ messages: [user, assistant] });
  if (!valid.success) fail(`the assembled messages do not validate: ${valid.error}`, assistant);
  if ((await transport.reconnectToStream({ chatId })) !== null) fail("a finished chat still resumes");

  console.log(JSON.stringify({ message: assistant, chunks: seenChunks }));
})().catch((err) => fail(err && err.stack ? err.stack : String(err)));
