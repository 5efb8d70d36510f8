// One chat turn through the `ai` package's transport (ai@6): every chunk checked against
// uiMessageChunkSchema; printed as JSON: the assembled UIMessage (`message`), the chunks in
// order (`chunks`), and each input a tool part showed while its input streamed
// (`streaming`: [toolCallId, input]). Exits 1 naming what failed.
// usage: node ai_sdk_assemble.cjs BASE_URL AGENT CHAT_ID   (NODE_PATH = the node_modules with ai)
const ai = require("ai");

const [base, agent, chatId] = process.argv.slice(2);
const transport = new ai.DefaultChatTransport({ api: `${base}/v1/agents/${agent}/chat` });
const schema = ai.uiMessageChunkSchema();

(async () => {
  const stream = await transport.sendMessages({
    chatId,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "say hello" }] }],
    trigger: "submit-message",
    messageId: undefined,
    abortSignal: undefined,
  });
  const [checked, assembled] = stream.tee();
  const chunks = [];
  const checking = (async () => {
    const reader = checked.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      chunks.push(value);
      const result = await schema.validate(value);
      if (!result.success) throw new Error(`chunk fails uiMessageChunkSchema: ${JSON.stringify(value)}`);
    }
  })();
  let last;
  const streaming = [];
  for await (const snapshot of ai.readUIMessageStream({ stream: assembled, terminateOnError: true })) {
    last = snapshot;
    for (const part of snapshot.parts) {
      if (part.state === "input-streaming") streaming.push([part.toolCallId, part.input]);
    }
  }
  await checking;
  console.log(JSON.stringify({ message: last, chunks, streaming }));
})().catch((err) => {
  console.error(`ai-sdk-assemble: ${err && err.stack ? err.stack : String(err)}`);
  process.exit(1);
});
