"""Chinese word lists shared by stages that tag Chinese text with jieba (CORECODE's concept screening,
the distractor engine's Chinese rewrites)."""

# Function words and light verbs that link everything to everything in ConceptNet and say nothing
# about a dialogue's content (jieba tags many of them v or a).
STOP_WORDS = (
    "是 有 在 说 要 会 能 可以 可能 应该 就 都 也 还 又 再 去 来 到 做 搞 弄 给 让 被 把 用 看 看看 想 想想 觉得 感觉 "
    "知道 认为 以为 没有 没 不 好 对 行 多 少 大 小 新 真 太 挺 很 最 更 这样 那样 这么 那么 怎么 怎么样 什么 为什么 "
    "东西 事 事情 时候 地方 样子 人 个 一个 一下 一点 有点 些 一些 啊 吧 呢 嘛 哦 嗯 哈 哈哈 呀 哇 喔 啦 了 过 着 "
    "你好 您好 嗨 拜拜 谢谢 没事 是的 好的 对啊 当然 其实 然后 所以 因为 但是 不过 而且 就是 还是 或者 已经 正在"
).split()
